//! One evaluation: every needed conversation prepared, each question
//! retrieved and assembled, answered, judged, and its outcome and trace built;
//! in parallel where the order does not matter.

use super::*;

impl Evaluator {
    pub(super) fn run(&self, s: &Strategy, qs: &[Job]) -> Result<PipelineEvaluation, EvalError> {
        self.check(s)?;
        let judge = self.judge_for(s);
        let local = Counters::default();
        let samples = self.dataset.samples();
        let prepared = self.prepare_all(s, qs, &local)?;
        let retrieve_fields = json(&s.retrieve_fields());

        // Retrieval and assembly, per question in parallel.
        let staged: Vec<Result<Staged, String>> = qs
            .par_iter()
            .map(|&job| match &prepared[&(job.si, job.view.map(|v| v.0))] {
                Ok(p) => Ok(self.stage(p.sample(&samples[job.si]), job, p, s, &retrieve_fields, &local)),
                Err(e) => Err(e.clone()),
            })
            .collect();
        let answers = self.answers(s, &staged, judge.as_ref(), &local);

        // Judgement, one batch for every question that has an answer stage behind it.
        let context_turns: Vec<Vec<String>> = staged
            .par_iter()
            .map(|st| match st {
                Ok(st) => st.ctx.turns.iter().map(|&o| samples[st.job.si].turn(o).id.clone()).collect(),
                Err(_) => Vec::new(),
            })
            .collect();
        let verdict = self.judge_all(judge.as_ref(), &staged, &answers, &context_turns);

        // Building traces allocates a lot: in parallel too (collect keeps the order).
        let outcomes: Vec<PipelineOutcome> = staged
            .par_iter()
            .zip(answers)
            .zip(verdict)
            .zip(context_turns)
            .zip(qs)
            .map(|((((st, answer), verdict), context_turns), &job)| {
                let q = self.question(job);
                let checkpoint = job.view.map(|v| self.observations[v.1].0);
                let mut o = match st {
                    Ok(st) => {
                        let p = prepared[&(job.si, job.view.map(|v| v.0))]
                            .as_ref()
                            .expect("staged questions have a memory");
                        let (answer, error) = match answer {
                            Ok(a) => (a, None),
                            Err(e) => (None, Some(e)),
                        };
                        let (verdict, error) = match verdict {
                            Some(Ok(v)) => (v, error),
                            Some(Err(e)) => (Verdict { correct: false, score: None }, Some(e)),
                            None => (Verdict { correct: false, score: None }, error),
                        };
                        self.outcome(p.sample(&samples[job.si]), q, p, st, context_turns, answer, verdict, error)
                    }
                    Err(e) => errored(q, e.clone()),
                };
                o.checkpoint = checkpoint;
                o
            })
            .collect();
        if let Some(disk) = &self.disk {
            disk.sweep();
        }
        if let Some(m) = &self.minilm {
            m.sweep();
        }
        let cache = local.snapshot();
        self.totals.add(&cache);
        let memory = memory_stats(&prepared);
        Ok(PipelineEvaluation { summary: Summary::from_outcomes(&outcomes), outcomes, cache, memory })
    }

    /// The judge the strategy asks for (the harness's F1 threshold wins).
    pub(super) fn judge_for(&self, s: &Strategy) -> Arc<dyn Judge> {
        match self.judge_kind(s) {
            JudgeKind::Evidence => Arc::new(EvidenceJudge),
            JudgeKind::Temporal => Arc::new(TemporalJudge),
            JudgeKind::F1 => {
                Arc::new(F1Judge { threshold: self.settings.f1_threshold.unwrap_or(s.judge.f1_threshold) })
            }
            JudgeKind::Llm => self.llm_judge.clone().expect("checked above"),
        }
    }

    /// Each conversation (or replay view) the questions need, ingested and
    /// indexed in parallel. A conversation whose extraction failed makes its
    /// questions errored, not the evaluation.
    pub(super) fn prepare_all(&self, s: &Strategy, qs: &[Job], local: &Counters) -> Result<PreparedMap, EvalError> {
        let samples = self.dataset.samples();
        let convs: Vec<(usize, Option<usize>)> =
            qs.iter().map(|q| (q.si, q.view.map(|v| v.0))).collect::<BTreeSet<_>>().into_iter().collect();
        convs
            .par_iter()
            .map(|&c| {
                let p = match c.1 {
                    None => self.prepare(&samples[c.0], s, local),
                    Some(n) => self.prepare_view(&samples[c.0], n, s, local),
                };
                let p = match p {
                    Ok(p) => Ok(p),
                    Err(EvalError::Extract(e)) => Err(e.to_string()),
                    Err(e) => return Err(e),
                };
                Ok((c, p))
            })
            .collect::<Result<_, _>>()
    }

    /// The answers of the staged questions: model answers go through the
    /// cache and one batch call; none at all when the judge does not read
    /// them (the evidence judge).
    pub(super) fn answers(
        &self,
        s: &Strategy,
        staged: &[Result<Staged, String>],
        judge: &dyn Judge,
        local: &Counters,
    ) -> Vec<Result<Option<String>, String>> {
        let answer_fields = json(&serde_json::to_value(&s.answer).expect("a strategy serializes"));
        let mut answers: Vec<Result<Option<String>, String>> = vec![Ok(None); staged.len()];
        if !judge.reads_answer() {
        } else if self.answerer.cacheable() {
            let id = self.answerer.id();
            let mut missing: Vec<(usize, Key)> = Vec::new();
            for (i, st) in staged.iter().enumerate() {
                let Ok(st) = st else { continue };
                let q = self.question(st.job);
                let text = render(&st.lines);
                let akey = key(&[b"answer", id.as_bytes(), &answer_fields, q.question.as_bytes(), text.as_bytes()]);
                match self.answer_cache.get(&akey) {
                    Some(a) => {
                        local.count(ANSWER, true);
                        answers[i] = Ok((*a).clone());
                    }
                    None => missing.push((i, akey)),
                }
            }
            let inputs: Vec<AnswerInput<'_>> = missing
                .iter()
                .map(|&(i, _)| {
                    let st = staged[i].as_ref().expect("only staged questions are missing");
                    AnswerInput { question: &self.question(st.job).question, lines: &st.lines }
                })
                .collect();
            let results = if inputs.is_empty() { Vec::new() } else { self.answerer.answer_batch(&inputs, &s.answer) };
            for ((i, akey), r) in missing.into_iter().zip(results) {
                local.count(ANSWER, false);
                answers[i] = match r {
                    Ok(a) => Ok((*self.answer_cache.insert(akey, a)).clone()),
                    Err(e) => Err(e.to_string()),
                };
            }
        } else {
            answers = staged
                .par_iter()
                .map(|st| match st {
                    Ok(st) => {
                        let q = self.question(st.job);
                        self.answerer
                            .answer(&AnswerInput { question: &q.question, lines: &st.lines }, &s.answer)
                            .map_err(|e| e.to_string())
                    }
                    Err(_) => Ok(None),
                })
                .collect();
        }

        answers
    }

    /// One batch judgement of every question that was staged and answered.
    pub(super) fn judge_all(
        &self,
        judge: &dyn Judge,
        staged: &[Result<Staged, String>],
        answers: &[Result<Option<String>, String>],
        context_turns: &[Vec<String>],
    ) -> Vec<Option<Result<Verdict, String>>> {
        let judged: Vec<usize> = (0..staged.len()).filter(|&i| staged[i].is_ok() && answers[i].is_ok()).collect();
        let cases: Vec<JudgeCase<'_>> = judged
            .iter()
            .map(|&i| {
                let st = staged[i].as_ref().expect("filtered");
                JudgeCase {
                    question: self.question(st.job),
                    answer: answers[i].as_ref().expect("filtered").as_deref(),
                    context_turns: &context_turns[i],
                }
            })
            .collect();
        let verdicts = if cases.is_empty() { Vec::new() } else { judge.judge_batch(&cases) };
        let mut verdict: Vec<Option<Result<Verdict, String>>> = vec![None; staged.len()];
        for (i, v) in judged.into_iter().zip(verdicts) {
            verdict[i] = Some(v.map_err(|e| e.to_string()));
        }

        verdict
    }

    /// Retrieval and assembly of one question.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stage(
        &self,
        sample: &Sample,
        job: Job,
        p: &Prepared,
        s: &Strategy,
        retrieve_fields: &[u8],
        local: &Counters,
    ) -> Staged {
        let q = self.question(job);
        let memory = &*p.memory;
        let rkey = key(&[b"retrieve", &p.index_key, retrieve_fields, q.id.as_bytes()]);
        let (ret, hit) = self
            .retrieve_cache
            .get_or_try::<std::convert::Infallible>(rkey, || {
                let embedded = p.queries.as_ref().map(|v| v[job.qi].as_slice());
                Ok(retrieve(&q.question, embedded, memory, &p.index, &s.retrieve))
            })
            .unwrap_or_else(|e| match e {});
        local.count(RETRIEVE, hit);
        let ctx = assemble(sample, memory, &ret, &s.assemble, self.settings.budget_ceiling);
        let lines = ctx.lines(sample, memory);
        Staged { job, ret, ctx, lines }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn outcome(
        &self,
        sample: &Sample,
        q: &Question,
        p: &Prepared,
        st: &Staged,
        context_turns: Vec<String>,
        answer: Option<String>,
        verdict: Verdict,
        error: Option<String>,
    ) -> PipelineOutcome {
        let memory = &*p.memory;
        let (ret, ctx) = (&st.ret, &st.ctx);
        let item_id = |i: u32| memory.items[i as usize].id.clone();
        let retrieved_items: BTreeSet<u32> = ret.hits.iter().map(|h| h.item).collect();
        let mut evidence_items: BTreeSet<u32> = BTreeSet::new();
        let evidence_trace: Vec<EvidenceTrace> = q
            .evidence
            .iter()
            .map(|turn| {
                let o = sample.ordinal(turn).expect("resolved evidence names an existing turn");
                let holders = &memory.holders[o as usize];
                evidence_items.extend(holders.iter().copied());
                EvidenceTrace {
                    turn: turn.clone(),
                    memory_ids: holders.iter().map(|&i| item_id(i)).collect(),
                    retrieved: holders.iter().any(|i| retrieved_items.contains(i)),
                    in_context: ctx.turns.contains(&o),
                }
            })
            .collect();

        PipelineOutcome {
            id: q.id.clone(),
            conversation: q.conversation.clone(),
            category: q.category.name().to_string(),
            question: q.question.clone(),
            gold_answer: q.answer.clone(),
            correct: verdict.correct && error.is_none(),
            evidence: q.evidence.clone(),
            unresolved_evidence: q.unresolved.clone(),
            evidence_memory_ids: evidence_items.into_iter().map(item_id).collect(),
            retrieved: ret
                .hits
                .iter()
                .enumerate()
                .map(|(r, h)| RetrievedItem {
                    id: item_id(h.item),
                    rank: r as u32 + 1,
                    score: round6(h.score),
                    channel: h.channel,
                })
                .collect(),
            context_ids: ctx.blocks.iter().map(|b| item_id(b.item)).collect(),
            context_turns,
            context_tokens: ctx.tokens,
            answer,
            evidence_trace,
            intent: ret.intent.map(|i| i.name().to_string()),
            expansion_terms: ret.expansion_terms.clone(),
            judge_score: verdict.score.map(round6),
            error,
            checkpoint: None,
            answer_coverage: AnswerCoverage::measure(sample, memory, q, ctx),
        }
    }
}

/// A question after retrieval and assembly.
pub(super) struct Staged {
    job: Job,
    ret: Arc<Retrieval>,
    ctx: Context,
    lines: Vec<ContextLine>,
}

/// The outcome of a question whose conversation could not be ingested.
pub(super) fn errored(q: &Question, error: String) -> PipelineOutcome {
    PipelineOutcome {
        id: q.id.clone(),
        conversation: q.conversation.clone(),
        category: q.category.name().to_string(),
        question: q.question.clone(),
        gold_answer: q.answer.clone(),
        correct: false,
        evidence: q.evidence.clone(),
        unresolved_evidence: q.unresolved.clone(),
        evidence_memory_ids: vec![],
        retrieved: vec![],
        context_ids: vec![],
        context_turns: vec![],
        context_tokens: 0,
        answer: None,
        evidence_trace: vec![],
        intent: None,
        expansion_terms: vec![],
        judge_score: None,
        error: Some(error),
        checkpoint: None,
        answer_coverage: None,
    }
}

/// Each conversation once, with its whole memory (under replay: as at its
/// last checkpoint).
pub(super) fn memory_stats(prepared: &PreparedMap) -> MemoryStats {
    let mut full: BTreeMap<usize, Option<&Arc<Memory>>> = BTreeMap::new();
    for ((si, _), p) in prepared {
        let e = full.entry(*si).or_default();
        if let Ok(p) = p {
            *e = Some(&p.full);
        }
    }
    let mut memory = MemoryStats { conversations: full.len(), ..MemoryStats::default() };
    for m in full.values().flatten() {
        let st: IngestStats = m.stats;
        memory.items += m.items.len();
        memory.candidates += st.candidates;
        memory.too_short += st.too_short;
        memory.duplicates += st.duplicates;
        memory.over_cap += st.over_cap;
        memory.retired += m.retired;
    }
    memory
}

/// A conversation's memory as at a checkpoint: the items of its first
/// sessions, the holders of its first turns. The ingest statistics stay the
/// whole conversation's (a replay reports them once, for the last checkpoint).
pub(super) fn memory_prefix(full: &Memory, view: &Sample) -> Memory {
    let sessions = view.sessions.len();
    let turns = view.turn_count();
    let items: Vec<_> = full.items.iter().take_while(|it| it.session < sessions).cloned().collect();
    debug_assert!(full.items[items.len()..].iter().all(|it| it.session >= sessions), "items are in session order");
    let last_day = view
        .sessions
        .iter()
        .filter_map(|s| s.date.map(|d| d.days()))
        .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
    Memory {
        conversation: full.conversation.clone(),
        items,
        holders: full.holders[..turns.min(full.holders.len())].to_vec(),
        last_day,
        stats: full.stats,
        retired: 0,
    }
}
