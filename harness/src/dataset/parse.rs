//! Reading the LoCoMo format: samples, sessions and their dates, turns,
//! questions with their evidence and reference versions; every problem names
//! the sample, the field and what was expected. Evidence ids are normalised
//! and resolved against the conversation's turns.

use super::*;

/// A short description of a JSON value for "expected X, got Y" messages.
pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            if short.len() < s.len() { format!("the string {short:?}...") } else { format!("the string {short:?}") }
        }
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

pub(super) fn shape(at: impl Into<String>, expected: &str, got: &Value) -> DatasetErrorKind {
    DatasetErrorKind::Shape { at: at.into(), expected: expected.into(), got: describe(got) }
}

pub(super) fn missing(at: impl Into<String>) -> DatasetErrorKind {
    DatasetErrorKind::Invalid { at: at.into(), message: "missing".into() }
}

pub(super) fn parse_samples(value: &Value) -> Result<Vec<Sample>, DatasetErrorKind> {
    let list = value.as_array().ok_or_else(|| shape("top level", "a list of samples", value))?;
    if list.is_empty() {
        return Err(DatasetErrorKind::Invalid { at: "top level".into(), message: "no samples".into() });
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let obj = v.as_object().ok_or_else(|| shape(format!("sample {i}"), "an object", v))?;
        let id = match obj.get("sample_id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => return Err(shape(format!("sample {i}: sample_id"), "a non-empty string", other)),
            None => return Err(missing(format!("sample {i}: sample_id"))),
        };
        if !seen.insert(id.clone()) {
            return Err(DatasetErrorKind::Invalid {
                at: format!("sample {i} ({id}): sample_id"),
                message: "duplicate sample id".into(),
            });
        }
        let at = format!("sample {i} ({id})");
        out.push(parse_sample(&at, id, obj)?);
    }
    Ok(out)
}

pub(super) fn parse_sample(
    at: &str,
    id: String,
    obj: &serde_json::Map<String, Value>,
) -> Result<Sample, DatasetErrorKind> {
    let conv_v = obj.get("conversation").ok_or_else(|| missing(format!("{at}: conversation")))?;
    let conv = conv_v.as_object().ok_or_else(|| shape(format!("{at}: conversation"), "an object", conv_v))?;
    let speaker = |key: &str| -> Result<String, DatasetErrorKind> {
        match conv.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(shape(format!("{at}: conversation.{key}"), "a string", v)),
            None => Err(missing(format!("{at}: conversation.{key}"))),
        }
    };
    let speaker_a = speaker("speaker_a")?;
    let speaker_b = speaker("speaker_b")?;

    let sessions = parse_sessions(at, conv)?;
    let (ordinals, locations) = turn_index(&sessions).map_err(|(s, t)| DatasetErrorKind::Invalid {
        at: format!("{at}: conversation.session_{}[{t}].dia_id", sessions[s].number),
        message: format!("duplicate dia_id {}", sessions[s].turns[t].id),
    })?;

    let qa_v = obj.get("qa").ok_or_else(|| missing(format!("{at}: qa")))?;
    let qa = qa_v.as_array().ok_or_else(|| shape(format!("{at}: qa"), "a list of questions", qa_v))?;
    let mut questions = Vec::with_capacity(qa.len());
    for (k, qv) in qa.iter().enumerate() {
        let q = parse_question(&format!("{at}: qa[{k}]"), &id, k, qv, &ordinals)?;
        questions.push(q);
    }
    check_versions(at, &questions, &sessions, &ordinals, &locations)?;
    Ok(Sample { id, speaker_a, speaker_b, sessions, questions, ordinals, locations })
}

/// The `session_N` lists of a conversation with their dates, in session
/// order; sessions without turns are left out, and at least one must remain.
pub(super) fn parse_sessions(
    at: &str,
    conv: &serde_json::Map<String, Value>,
) -> Result<Vec<Session>, DatasetErrorKind> {
    let mut sessions = Vec::new();
    for (key, v) in conv {
        let Some(num) = key.strip_prefix("session_").and_then(|n| n.parse::<u32>().ok()) else { continue };
        let field = format!("{at}: conversation.{key}");
        let turns_v = v.as_array().ok_or_else(|| shape(&field, "a list of turns", v))?;
        let date_key = format!("session_{num}_date_time");
        let date_time = match conv.get(&date_key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => return Err(shape(format!("{at}: conversation.{date_key}"), "a string", other)),
        };
        let mut turns = Vec::with_capacity(turns_v.len());
        for (t, tv) in turns_v.iter().enumerate() {
            turns.push(parse_turn(&format!("{field}[{t}]"), tv)?);
        }
        if turns.is_empty() {
            continue;
        }
        // A date that is written but cannot be read would silently lose the session's
        // dating (recency, date stamps): refuse it, naming the sample and field.
        let date = match date_time.as_deref() {
            None => None,
            Some(text) if text.trim().is_empty() => None,
            Some(text) => Some(SessionDate::parse(text).ok_or_else(|| DatasetErrorKind::Invalid {
                at: format!("{at}: conversation.{date_key}"),
                message: format!(
                    "cannot read the date {text:?} (expected the LoCoMo form, e.g. \"1:56 pm on 8 May, 2023\"; \
                     null or no field means undated)"
                ),
            })?),
        };
        sessions.push(Session { number: num, date_time, date, turns });
    }
    sessions.sort_by_key(|s| s.number);
    if sessions.is_empty() {
        return Err(DatasetErrorKind::Invalid {
            at: format!("{at}: conversation"),
            message: "no session_N lists with turns".into(),
        });
    }
    Ok(sessions)
}

/// A question's reference versions hold only once their evidence exists:
/// each `from_session` is at most the last session, and no evidence turn
/// comes from a later session than its version's `from_session`.
pub(super) fn check_versions(
    at: &str,
    questions: &[Question],
    sessions: &[Session],
    ordinals: &HashMap<String, u32>,
    locations: &[(u32, u32)],
) -> Result<(), DatasetErrorKind> {
    let session_number =
        |dia_id: &str| ordinals.get(dia_id).map(|&o| sessions[locations[o as usize].0 as usize].number);
    let last_session = sessions.last().map_or(0, |s| s.number);
    for (k, q) in questions.iter().enumerate() {
        for (j, v) in q.reference_versions.iter().enumerate() {
            if v.from_session > last_session {
                return Err(DatasetErrorKind::Invalid {
                    at: format!("{at}: qa[{k}].reference_versions[{j}].from_session"),
                    message: format!("{} is after the last session ({last_session})", v.from_session),
                });
            }
            for e in &v.evidence {
                let n = session_number(e).expect("resolved evidence names an existing turn");
                if n > v.from_session {
                    return Err(DatasetErrorKind::Invalid {
                        at: format!("{at}: qa[{k}].reference_versions[{j}].evidence"),
                        message: format!(
                            "{e} is in session {n}, after from_session {} (a reference cannot hold before its evidence exists)",
                            v.from_session
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

pub(super) fn parse_turn(at: &str, v: &Value) -> Result<Turn, DatasetErrorKind> {
    let obj = v.as_object().ok_or_else(|| shape(at, "a turn object", v))?;
    let string = |key: &str| -> Result<String, DatasetErrorKind> {
        match obj.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(shape(format!("{at}.{key}"), "a string", v)),
            None => Err(missing(format!("{at}.{key}"))),
        }
    };
    let raw_id = string("dia_id")?;
    let id = normalize_id(&raw_id).ok_or_else(|| DatasetErrorKind::Invalid {
        at: format!("{at}.dia_id"),
        message: format!("expected an id like D3:5, got {raw_id:?}"),
    })?;
    let caption = match obj.get("blip_caption") {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    };
    Ok(Turn { id, speaker: string("speaker")?, text: string("text")?, caption })
}

pub(super) fn parse_question(
    at: &str,
    sample_id: &str,
    index: usize,
    v: &Value,
    turns: &HashMap<String, u32>,
) -> Result<Question, DatasetErrorKind> {
    let obj = v.as_object().ok_or_else(|| shape(at, "a question object", v))?;
    let question = match obj.get("question") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(v) => return Err(shape(format!("{at}.question"), "a non-empty string", v)),
        None => return Err(missing(format!("{at}.question"))),
    };
    let category = match obj.get("category") {
        Some(v @ Value::Number(n)) => {
            n.as_u64().and_then(Category::from_number).ok_or_else(|| shape(format!("{at}.category"), "1 to 5", v))?
        }
        Some(v) => return Err(shape(format!("{at}.category"), "a number 1 to 5", v)),
        None => return Err(missing(format!("{at}.category"))),
    };
    let answer_of = |key: &str| -> Result<Option<String>, DatasetErrorKind> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(v) => Err(shape(format!("{at}.{key}"), "a string, a number or null", v)),
        }
    };
    let answer = answer_of("answer")?;
    let adversarial_answer = answer_of("adversarial_answer")?;
    let ev_v = obj.get("evidence").ok_or_else(|| missing(format!("{at}.evidence")))?;
    let ev_list = ev_v.as_array().ok_or_else(|| shape(format!("{at}.evidence"), "a list of strings", ev_v))?;
    let mut raw_evidence = Vec::with_capacity(ev_list.len());
    for (e, item) in ev_list.iter().enumerate() {
        match item {
            Value::String(s) => raw_evidence.push(s.clone()),
            other => return Err(shape(format!("{at}.evidence[{e}]"), "a string", other)),
        }
    }
    let (evidence, unresolved) = resolve_evidence(&raw_evidence, |id| turns.contains_key(id));
    let reference_versions = match obj.get("reference_versions") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => {
            parse_versions(&format!("{at}.reference_versions"), v, turns, answer.as_deref(), &evidence, &unresolved)?
        }
    };
    Ok(Question {
        id: format!("{sample_id}#{index}"),
        conversation: sample_id.to_string(),
        index,
        question,
        answer,
        adversarial_answer,
        category,
        raw_evidence,
        evidence,
        unresolved,
        reference_versions,
    })
}

/// Reads `reference_versions`: a non-empty list ascending by `from_session`,
/// every evidence id resolvable, the last version equal to the question's own
/// answer and evidence.
pub(super) fn parse_versions(
    at: &str,
    v: &Value,
    turns: &HashMap<String, u32>,
    answer: Option<&str>,
    evidence: &[String],
    unresolved: &[String],
) -> Result<Vec<ReferenceVersion>, DatasetErrorKind> {
    let list = v.as_array().ok_or_else(|| shape(at, "a list of {from_session, answer, evidence} objects", v))?;
    if list.is_empty() {
        return Err(DatasetErrorKind::Invalid { at: at.into(), message: "empty (omit the field instead)".into() });
    }
    let mut out: Vec<ReferenceVersion> = Vec::with_capacity(list.len());
    for (j, item) in list.iter().enumerate() {
        let here = format!("{at}[{j}]");
        let obj = item.as_object().ok_or_else(|| shape(&here, "an object", item))?;
        let from_session = match obj.get("from_session") {
            Some(n @ Value::Number(_)) => n
                .as_u64()
                .filter(|&n| n >= 1 && n <= u64::from(u32::MAX))
                .ok_or_else(|| shape(format!("{here}.from_session"), "a session number >= 1", n))?
                as u32,
            Some(other) => return Err(shape(format!("{here}.from_session"), "a session number >= 1", other)),
            None => return Err(missing(format!("{here}.from_session"))),
        };
        if let Some(prev) = out.last()
            && prev.from_session >= from_session
        {
            return Err(DatasetErrorKind::Invalid {
                at: format!("{here}.from_session"),
                message: format!(
                    "{from_session} does not follow {} (versions ascend by from_session)",
                    prev.from_session
                ),
            });
        }
        let version_answer = match obj.get("answer") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => return Err(shape(format!("{here}.answer"), "a string, a number or null", other)),
        };
        let ev_v = obj.get("evidence").ok_or_else(|| missing(format!("{here}.evidence")))?;
        let ev_list = ev_v.as_array().ok_or_else(|| shape(format!("{here}.evidence"), "a list of strings", ev_v))?;
        let mut raw_evidence = Vec::with_capacity(ev_list.len());
        for (e, item) in ev_list.iter().enumerate() {
            match item {
                Value::String(s) => raw_evidence.push(s.clone()),
                other => return Err(shape(format!("{here}.evidence[{e}]"), "a string", other)),
            }
        }
        let (resolved, bad) = resolve_evidence(&raw_evidence, |id| turns.contains_key(id));
        if !bad.is_empty() {
            return Err(DatasetErrorKind::Invalid {
                at: format!("{here}.evidence"),
                message: format!("no turn {} (a version's evidence must resolve)", bad.join(", ")),
            });
        }
        out.push(ReferenceVersion { from_session, answer: version_answer, raw_evidence, evidence: resolved });
    }
    let last = out.last().expect("non-empty");
    if last.answer.as_deref() != answer || last.evidence != evidence || !unresolved.is_empty() {
        return Err(DatasetErrorKind::Invalid {
            at: format!("{at}[{}]", out.len() - 1),
            message: "the last version must have the question's own answer and evidence (the reference at the end)"
                .into(),
        });
    }
    Ok(out)
}

/// Normalizes one evidence id: `D30:05` -> `D30:5`, `D:11:26` -> `D11:26`.
/// None when it is not of the form D<session>:<turn> (for example `D`).
pub fn normalize_id(raw: &str) -> Option<String> {
    let s = raw.trim();
    let rest = s.strip_prefix('D').or_else(|| s.strip_prefix('d'))?;
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let (a, b) = rest.split_once(':')?;
    let num = |x: &str| -> Option<u32> {
        let x = x.trim();
        if x.is_empty() || !x.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        x.parse().ok()
    };
    Some(format!("D{}:{}", num(a)?, num(b)?))
}

/// Splits and normalizes evidence entries (`"D8:6; D9:17"` holds two ids).
/// Returns (resolved ids of existing turns in order of first mention, unresolvable ids as written).
pub fn resolve_evidence(raw: &[String], exists: impl Fn(&str) -> bool) -> (Vec<String>, Vec<String>) {
    let mut resolved: Vec<String> = Vec::new();
    let mut unresolved = Vec::new();
    for entry in raw {
        let pieces: Vec<&str> =
            entry.split(|c: char| c == ';' || c == ',' || c.is_whitespace()).filter(|p| !p.is_empty()).collect();
        if pieces.is_empty() {
            unresolved.push(entry.clone());
            continue;
        }
        for p in pieces {
            match normalize_id(p) {
                Some(id) if exists(&id) => {
                    if !resolved.contains(&id) {
                        resolved.push(id);
                    }
                }
                _ => unresolved.push(p.to_string()),
            }
        }
    }
    (resolved, unresolved)
}
