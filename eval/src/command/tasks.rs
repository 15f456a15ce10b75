//! The task set of an external harness: the questions asked, grouped by
//! conversation, and the LoCoMo-format task file written for each shard.

use super::*;

/// One question of the task set.
#[derive(Debug, Clone)]
pub(super) struct Task {
    pub(super) id: String,
    pub(super) conversation: String,
    pub(super) category: &'static str,
    /// Index into `TaskSet::samples`.
    pub(super) sample: usize,
    /// Its `qa` entry in the shard file, rendered once.
    pub(super) qa_json: String,
}

/// The locked task set, pre-rendered so that writing a shard costs a copy.
#[derive(Debug, Clone)]
pub(super) struct TaskSet {
    pub(super) name: String,
    pub(super) hash: String,
    /// Per sample: `{"sample_id":...,"conversation":{...},"qa":[` (the questions follow).
    pub(super) sample_heads: Vec<String>,
    /// Dataset order.
    pub(super) tasks: Vec<Task>,
    pub(super) position: HashMap<String, usize>,
}

impl TaskSet {
    pub(super) fn new(
        dataset: &emend_harness::Dataset,
        selection: &emend_harness::Selection,
    ) -> Result<TaskSet, SetupError> {
        let selected = dataset.select(selection).map_err(|e| SetupError::new(format!("harness.conversations: {e}")))?;
        let mut sample_index: HashMap<&str, usize> = HashMap::new();
        let mut sample_heads = Vec::new();
        let mut tasks = Vec::with_capacity(selected.len());
        for q in selected {
            let sample = match sample_index.get(q.conversation.as_str()) {
                Some(&i) => i,
                None => {
                    let s = dataset.sample(&q.conversation).expect("a selected question's sample exists");
                    sample_heads.push(render_sample_head(s));
                    sample_index.insert(s.id.as_str(), sample_heads.len() - 1);
                    sample_heads.len() - 1
                }
            };
            let mut qa = json!({
                "id": q.id,
                "question": q.question,
                "answer": q.answer,
                "category": q.category.number(),
                "category_name": q.category.name(),
                "evidence": q.raw_evidence,
                "resolved_evidence": q.evidence,
                "unresolved_evidence": q.unresolved,
            });
            if let Some(a) = &q.adversarial_answer {
                qa["adversarial_answer"] = json!(a);
            }
            tasks.push(Task {
                id: q.id.clone(),
                conversation: q.conversation.clone(),
                category: q.category.name(),
                sample,
                qa_json: qa.to_string(),
            });
        }
        let position = tasks.iter().enumerate().map(|(i, t)| (t.id.clone(), i)).collect();
        Ok(TaskSet {
            name: dataset.name().to_string(),
            hash: dataset.hash().to_string(),
            sample_heads,
            tasks,
            position,
        })
    }

    /// The shard file's text for tasks `positions` (dataset order).
    pub(super) fn render_shard(&self, index: usize, count: usize, positions: &[usize]) -> String {
        let mut out = String::with_capacity(positions.len() * 300 + 1024);
        let head = json!({
            "protocol": PROTOCOL,
            "shard": {"index": index, "count": count},
            "dataset": {"name": self.name, "hash": self.hash},
            "question_ids": positions.iter().map(|&p| self.tasks[p].id.as_str()).collect::<Vec<_>>(),
        })
        .to_string();
        out.push_str(&head[..head.len() - 1]);
        out.push_str(",\"samples\":[");
        let mut current: Option<usize> = None;
        for &p in positions {
            let t = &self.tasks[p];
            if current != Some(t.sample) {
                if current.is_some() {
                    out.push_str("]},");
                }
                out.push_str(&self.sample_heads[t.sample]);
                current = Some(t.sample);
            } else {
                out.push(',');
            }
            out.push_str(&t.qa_json);
        }
        if current.is_some() {
            out.push_str("]}");
        }
        out.push_str("]}\n");
        out
    }
}

/// `{"sample_id":...,"conversation":{...},"qa":[`
pub(super) fn render_sample_head(s: &emend_harness::dataset::Sample) -> String {
    let mut conv = serde_json::Map::new();
    conv.insert("speaker_a".into(), json!(s.speaker_a));
    conv.insert("speaker_b".into(), json!(s.speaker_b));
    for session in &s.sessions {
        conv.insert(format!("session_{}_date_time", session.number), json!(session.date_time));
        let turns: Vec<Value> = session
            .turns
            .iter()
            .map(|t| {
                let mut turn = json!({"speaker": t.speaker, "dia_id": t.id, "text": t.text});
                if let Some(c) = &t.caption {
                    turn["blip_caption"] = json!(c);
                }
                turn
            })
            .collect();
        conv.insert(format!("session_{}", session.number), Value::Array(turns));
    }
    let text = json!({"sample_id": s.id, "conversation": conv, "qa": []}).to_string();
    // Leave the qa list open: the shard's questions are appended.
    text[..text.len() - 2].to_string()
}
