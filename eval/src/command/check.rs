//! Reading back a shard's outcomes file and checking it against the
//! protocol: the outcome schema, the shard's question ids, categories and
//! conversations, no id twice and none missing; a problem names the line
//! and the field.

use super::*;

/// The outcome schema, compiled.
pub fn outcome_validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(OUTCOME_SCHEMA).expect("the outcome schema is JSON (tested)");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .expect("the outcome schema is a valid JSON Schema (tested)")
}

pub(super) fn read_output(out: &Path) -> Result<String, OutcomeFileError> {
    let meta = std::fs::metadata(out).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            OutcomeFileError::NotWritten
        } else {
            OutcomeFileError::Unreadable { source }
        }
    })?;
    if meta.len() > MAX_OUTPUT_BYTES {
        return Err(OutcomeFileError::TooLarge { bytes: meta.len() });
    }
    let bytes = std::fs::read(out).map_err(|source| OutcomeFileError::Unreadable { source })?;
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1;
        OutcomeFileError::NotUtf8 { line, offset }
    })
}

/// A shard's outcomes that follow the protocol.
#[derive(Debug)]
pub struct Checked {
    /// One per question of the shard, in file order.
    pub records: Vec<BackendOutcome>,
    /// Set when some records carry an `error`: the shard is retried.
    pub unanswered: Option<ShardFailure>,
}

/// Checks a shard's outcomes file (`text`) against the protocol: every line
/// a JSON object valid against the outcome schema, for a question of this
/// shard with its category and conversation, no id twice, none missing.
/// The error names the line and the field.
pub(super) fn check_outcomes(
    validator: &jsonschema::Validator,
    tasks: &TaskSet,
    positions: &[usize],
    text: &str,
) -> Result<Checked, OutcomeFileError> {
    let expected: HashMap<&str, &Task> =
        positions.iter().map(|&p| (tasks.tasks[p].id.as_str(), &tasks.tasks[p])).collect();
    let lines: Vec<(usize, &str)> =
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, l)).collect();
    // Lines are independent up to their ids, which are compared afterwards.
    let checked: Vec<Result<BackendOutcome, LineProblem>> =
        lines.iter().map(|(_, l)| check_record(validator, &expected, l)).collect();
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(positions.len());
    let mut records = Vec::with_capacity(positions.len());
    let mut first_bad: Option<(usize, LineProblem)> = None;
    let mut bad_lines = 0usize;
    let mut first_unanswered: Option<(usize, String, String)> = None;
    let mut unanswered = 0usize;
    for (&(lineno, _), result) in lines.iter().zip(checked) {
        let result = result.and_then(|record| match seen.get(&record.id) {
            Some(&first_line) => Err(LineProblem::Duplicate { id: record.id, first_line }),
            None => {
                seen.insert(record.id.clone(), lineno);
                Ok(record)
            }
        });
        match result {
            Ok(record) => {
                if let Some(e) = &record.error {
                    unanswered += 1;
                    first_unanswered.get_or_insert_with(|| (lineno, record.id.clone(), e.clone()));
                }
                records.push(record);
            }
            Err(problem) => {
                bad_lines += 1;
                first_bad.get_or_insert((lineno, problem));
            }
        }
    }
    if let Some((line, problem)) = first_bad {
        return Err(OutcomeFileError::BadLine { line, problem, others: bad_lines - 1 });
    }
    let missing: Vec<String> =
        positions.iter().map(|&p| &tasks.tasks[p].id).filter(|id| !seen.contains_key(id.as_str())).cloned().collect();
    if !missing.is_empty() {
        return Err(OutcomeFileError::Missing { missing, expected: positions.len() });
    }
    let unanswered =
        first_unanswered.map(|(line, id, error)| ShardFailure::Unanswered { line, id, error, others: unanswered - 1 });
    Ok(Checked { records, unanswered })
}

/// One line: JSON, valid against the outcome schema, a question of this
/// shard with the question's category and conversation.
pub(super) fn check_record(
    validator: &jsonschema::Validator,
    expected: &HashMap<&str, &Task>,
    line: &str,
) -> Result<BackendOutcome, LineProblem> {
    let value: Value = emend_harness::strict_json::from_str(line).map_err(|e| {
        let mut message = e.to_string();
        if let Some(at) = message.rfind(" at line ") {
            message.truncate(at);
        }
        LineProblem::NotJson { column: e.column(), message }
    })?;
    if !validator.is_valid(&value) {
        let mut problems: Vec<FieldProblem> = validator
            .iter_errors(&value)
            .flat_map(|e| schema::explain(&e, Dialect::Json))
            .map(|p| FieldProblem { field: p.path, message: p.message })
            .collect();
        problems.sort();
        problems.dedup();
        return Err(LineProblem::Schema { problems });
    }
    let id = value["id"].as_str().expect("the schema requires a string id");
    let Some(task) = expected.get(id) else {
        return Err(LineProblem::NotInShard { id: id.to_string() });
    };
    let category = value["category"].as_str().expect("the schema requires a string category");
    if category != task.category {
        return Err(LineProblem::WrongCategory { expected: task.category.to_string(), got: category.to_string() });
    }
    let conversation = value["conversation"].as_str().expect("the schema requires a string conversation");
    if conversation != task.conversation {
        return Err(LineProblem::WrongConversation {
            expected: task.conversation.clone(),
            got: conversation.to_string(),
        });
    }
    serde_json::from_value::<BackendOutcome>(value).map_err(|source| LineProblem::NotARecord { source })
}
