//! The workflow behind `emend init`, as a plain request and a plain result.
//! The binary builds the [`InitRequest`] from its arguments, prints the
//! [`Initialized`] and maps an [`InitError`] to its exit code.
//!
//! First the plan, checked before anything is written: an existing
//! `emend.yaml` is refused, as is a schema copy or configuration schema that
//! differs from emend's; `--tasks`, `--schema` and `--harness-command` files
//! are rewritten relative to the project (emend.yaml holds its paths relative
//! to its own directory); the starting strategy is read with its bounds; the
//! generated configuration is parsed back. Then the writing: the directory,
//! the backend (the task set and harness checked; a harness command is run
//! once, on one question, before anything is written), emend.yaml and its schema,
//! the journal with v1, `.emend/.gitignore`, the copy of the built-in
//! strategy schema (without `--schema`) and the served file. A failure once
//! the directory exists removes what this workflow created ([`Created`]).

use std::path::{Path, PathBuf};

use emend_core::artifact::{self, Artifact, ArtifactError};
use emend_core::config::{self, HarnessKind, Project};
use emend_core::events::EngineProjector;
use emend_core::schema::{self, SchemaError, StrategySchema};
use emend_core::served::{self, ServedError};
use emend_core::store::{Store, StoreError};
use emend_journal::{EventLog, JournalError, SledJournal};

/// What `emend init` writes into `.emend/`: the journal and caches are local state, not sources.
const STATE_GITIGNORE: &str = "# Written by emend init: the journal, caches and lock are local state.\n*\n";

/// A new project, as asked. Paths are as the user gave them, relative to the
/// current directory; emend.yaml holds them relative to `dir`.
#[derive(Debug, Clone)]
pub struct InitRequest {
    /// The project directory (created if missing).
    pub dir: PathBuf,
    /// The locked task set: `builtin` or a LoCoMo-format JSON file.
    pub tasks: String,
    /// The strategy schema of an external system; None for the built-in one.
    pub schema: Option<PathBuf>,
    /// The starting strategy; None for emend's built-in default.
    pub strategy: Option<PathBuf>,
    /// The argv of an external harness command; None for the built-in harness.
    pub harness_command: Option<Vec<String>>,
    /// Only these conversations (sample ids) form the task set.
    pub conversations: Option<Vec<String>>,
}

/// What `init` created, for the caller to report.
#[derive(Debug, Clone)]
pub struct Initialized {
    /// The project directory, as asked.
    pub dir: PathBuf,
    /// emend.yaml.
    pub config: PathBuf,
    /// The schema of emend.yaml its modeline names.
    pub config_schema: PathBuf,
    /// The served file (v1).
    pub strategy: PathBuf,
    /// The journal's directory.
    pub journal: PathBuf,
    /// The strategy schema: the `--schema` file, or the copy of the built-in one.
    pub schema: PathBuf,
    /// `harness.schema` as emend.yaml holds it; None for the built-in schema.
    pub schema_rel: Option<PathBuf>,
    /// The content hash of v1.
    pub served_hash: String,
    /// Where v1 came from (the `--strategy` path, or the built-in default).
    pub origin: String,
    /// `harness.tasks` as emend.yaml holds it.
    pub tasks: String,
    /// The size of the task set.
    pub questions: usize,
}

/// Why `init` refused or failed. [`InitError::BadInput`], [`InitError::Schema`] and
/// [`InitError::Strategy`] are bad input (exit 2); [`InitError::Failed`] and
/// [`InitError::Io`] are failures (exit 1); [`InitError::Journal`] and
/// [`InitError::Served`] and [`InitError::Store`] carry their own class.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// Refused as asked: the message names the file or flag.
    #[error("{0}")]
    BadInput(String),
    /// The `--schema` file cannot be read or is no strategy schema.
    #[error(transparent)]
    Schema(SchemaError),
    /// The starting strategy is refused.
    #[error(transparent)]
    Strategy(ArtifactError),
    /// Could not go on: the message names the file.
    #[error("{0}")]
    Failed(String),
    /// emend.yaml could not be written.
    #[error(transparent)]
    Io(std::io::Error),
    /// The journal could not be opened.
    #[error(transparent)]
    Journal(JournalError),
    /// The first version could not be journaled or served.
    #[error(transparent)]
    Served(ServedError),
    /// The journal could not be read.
    #[error(transparent)]
    Store(StoreError),
}

/// Creates the project `request` asks for: checks everything it can before
/// writing, then writes; a failure once the directory exists leaves nothing
/// this call created behind.
pub fn init(request: &InitRequest) -> Result<Initialized, InitError> {
    let plan = plan(request)?;
    // From here on a failure removes what this call created.
    let dir = &request.dir;
    let created = Created::new(dir);
    std::fs::create_dir_all(dir).map_err(|e| InitError::Failed(format!("{}: {e}", dir.display())))?;
    match write_project(&plan, request) {
        Ok(questions) => Ok(plan.initialized(questions)),
        Err(e) => {
            created.undo(&plan.project);
            Err(e)
        }
    }
}

/// What `init` will write, checked before anything is: the configuration, the
/// schema and the first version.
struct Plan {
    project: Project,
    /// The text of emend.yaml.
    config: String,
    /// `harness.tasks` as emend.yaml holds it.
    tasks: String,
    schema: StrategySchema,
    /// `harness.schema` as emend.yaml holds it; None for the built-in schema.
    schema_rel: Option<PathBuf>,
    /// Where the first version comes from, as `init` reports it.
    origin: String,
    start: Artifact,
}

impl Plan {
    fn initialized(self, questions: usize) -> Initialized {
        let project = &self.project;
        let schema = project.resolve(self.schema_rel.as_deref().unwrap_or(Path::new(artifact::PROJECT_SCHEMA_FILE)));
        Initialized {
            dir: project.dir.clone(),
            config: project.config_path(),
            config_schema: project.dir.join(config::CONFIG_SCHEMA_FILE),
            strategy: project.strategy_path(),
            journal: project.journal_dir(),
            schema,
            schema_rel: self.schema_rel,
            served_hash: self.start.hash,
            origin: self.origin,
            tasks: self.tasks,
            questions,
        }
    }
}

fn plan(request: &InitRequest) -> Result<Plan, InitError> {
    let dir = &request.dir;
    if dir.join(config::CONFIG_FILE).exists() {
        return Err(InitError::BadInput(format!(
            "{}: already exists; refusing to overwrite a project",
            dir.join(config::CONFIG_FILE).display()
        )));
    }
    // Paths given on the command line are relative to where the user stands.
    // emend.yaml holds them relative to its own directory, as its header says.
    let project_abs = absolute_dir(dir);
    let tasks = tasks_setting(&request.tasks, &project_abs)?;
    let schema_path = request.schema.as_deref().map(absolute);
    let schema = match &schema_path {
        Some(p) => StrategySchema::from_path(p).map_err(InitError::Schema)?,
        None => StrategySchema::builtin(),
    };
    refuse_different_copies(dir, request.schema.is_none())?;
    let schema_rel = schema_path.as_deref().map(|p| PathBuf::from(artifact::relative_path(&project_abs, p)));
    let (origin, start) = starting_strategy(request.strategy.as_deref(), &schema)?;
    let strategy_rel = PathBuf::from("strategies/served.yaml");
    let argv = request.harness_command.as_ref().map(|argv| relative_argv(argv, &project_abs));
    let mut config = config::render_config(&tasks, &strategy_rel, argv.as_deref(), schema_rel.as_deref());
    if let Some(convs) = &request.conversations {
        let list =
            convs.iter().map(|c| serde_json::to_string(c).expect("string renders")).collect::<Vec<_>>().join(", ");
        config = config.replacen("  conversations: null\n", &format!("  conversations: [{list}]\n"), 1);
    }
    // Check the configuration and the task set before writing anything.
    let parsed = config::parse_config(&config)
        .map_err(|m| InitError::Failed(format!("generated emend.yaml is invalid: {m}")))?;
    let project = Project { dir: dir.clone(), config: parsed };
    // A journal is a project's history: a new v1 over it would contradict
    // what it says is served, and an undo must never remove it.
    if project.journal_dir().exists() {
        return Err(InitError::BadInput(format!(
            "{}: a journal already exists (the project's history); refusing to initialize over it \
             (restore emend.yaml beside it, or move it away)",
            project.journal_dir().display()
        )));
    }
    Ok(Plan { project, config, tasks, schema, schema_rel, origin, start })
}

/// Refuses to overwrite a strategy schema copy (only written without `--schema`)
/// or a configuration schema that differs from emend's.
fn refuse_different_copies(dir: &Path, builtin_schema: bool) -> Result<(), InitError> {
    let schema_copy = dir.join(artifact::PROJECT_SCHEMA_FILE);
    if builtin_schema
        && schema_copy.exists()
        && std::fs::read(&schema_copy).ok().as_deref() != Some(schema::BUILTIN_SCHEMA.as_bytes())
    {
        return Err(InitError::BadInput(format!(
            "{}: already exists and differs from emend's schema; refusing to overwrite it",
            schema_copy.display()
        )));
    }
    let config_schema = dir.join(config::CONFIG_SCHEMA_FILE);
    if config_schema.exists() && std::fs::read(&config_schema).ok().as_deref() != Some(config::CONFIG_SCHEMA.as_bytes())
    {
        return Err(InitError::BadInput(format!(
            "{}: already exists and differs from emend's configuration schema; refusing to overwrite it",
            config_schema.display()
        )));
    }
    Ok(())
}

/// `--tasks` as emend.yaml holds it: `builtin`, or the file relative to the project.
fn tasks_setting(tasks: &str, project_abs: &Path) -> Result<String, InitError> {
    if tasks == "builtin" {
        return Ok(tasks.to_string());
    }
    let file = absolute(Path::new(tasks));
    if !file.is_file() {
        return Err(InitError::BadInput(format!("--tasks {tasks}: no such file")));
    }
    Ok(artifact::relative_path(project_abs, &file))
}

/// The first version, `--strategy` or the built-in default, read with the strategy
/// size and depth bounds, and where it came from.
fn starting_strategy(strategy: Option<&Path>, schema: &StrategySchema) -> Result<(String, Artifact), InitError> {
    match strategy {
        Some(p) => Ok((p.display().to_string(), artifact::load_file(p, schema).map_err(InitError::Strategy)?)),
        None => {
            let origin = "strategies/default.yaml (built in)".to_string();
            let start =
                artifact::from_yaml(&origin, artifact::DEFAULT_STRATEGY, schema).map_err(InitError::Strategy)?;
            Ok((origin, start))
        }
    }
}

/// Writes the project into its (existing) directory: emend.yaml and the schema its
/// modeline names, the journal with v1, the served file and, without `--schema`, a
/// copy of the built-in strategy schema. The task set and harness are checked (the
/// backend built) before anything is written. Returns the size of the task set.
fn write_project(plan: &Plan, request: &InitRequest) -> Result<usize, InitError> {
    let (dir, project) = (&request.dir, &plan.project);
    let questions = open_backend(project, &plan.schema, &plan.start, request)?;
    artifact::write_atomic(&project.config_path(), plan.config.as_bytes()).map_err(InitError::Io)?;
    // The schema emend.yaml's first line names, for editors; emend itself reads
    // emend.yaml with its own parser.
    write_file(&dir.join(config::CONFIG_SCHEMA_FILE), config::CONFIG_SCHEMA.as_bytes())?;
    let mut log = open_journal(project)?;
    let state = dir.join(config::STATE_DIR).join(".gitignore");
    artifact::write_atomic(&state, STATE_GITIGNORE.as_bytes())
        .map_err(|e| InitError::Failed(format!("{}: {e}", state.display())))?;
    if request.schema.is_none() {
        // For editors (the served file's modeline) and other tools; `harness.schema: null`
        // still means the built-in schema, so editing this copy changes nothing.
        write_file(&dir.join(artifact::PROJECT_SCHEMA_FILE), schema::BUILTIN_SCHEMA.as_bytes())?;
    }
    serve_first(project, &mut log, &plan.start, &plan.origin).map_err(InitError::Served)?;
    Ok(questions)
}

/// Journals `start` as v1 and writes it as the served file.
fn serve_first<L: EventLog>(project: &Project, log: &mut L, start: &Artifact, origin: &str) -> Result<(), ServedError> {
    served::initialize(log, start, &format!("initialized from {origin}"))?;
    served::write_served(project, 1, None, &start.hash, &served::strip_metadata(&start.value))
}

/// A project whose journal serves nothing yet (emend.yaml written by hand,
/// no `emend init`): its served file, else `initial_strategy`, becomes v1.
/// Returns where v1 came from, None when a version was served already.
/// Refused (bad input) when there is neither.
pub fn ensure_first_version<L: EventLog>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
) -> Result<Option<PathBuf>, InitError> {
    if Store::new(&*log).served().map_err(InitError::Store)?.is_some() {
        return Ok(None);
    }
    let path = project.strategy_path();
    let source = if path.exists() {
        path.clone()
    } else if let Some(initial) = &project.config.initial_strategy {
        project.resolve(initial)
    } else {
        return Err(InitError::BadInput(format!(
            "{}: no served strategy and no journal (set initial_strategy in emend.yaml or run `emend init`)",
            path.display()
        )));
    };
    let start = artifact::load_file(&source, schema).map_err(InitError::Strategy)?;
    serve_first(project, log, &start, &source.display().to_string()).map_err(InitError::Served)?;
    Ok(Some(source))
}

/// Writes `contents` to `path` atomically, creating its parent; errors name the path.
fn write_file(path: &Path, contents: &[u8]) -> Result<(), InitError> {
    let parent = path.parent().expect("a file under schema/");
    std::fs::create_dir_all(parent).map_err(|e| InitError::Failed(format!("{}: {e}", parent.display())))?;
    artifact::write_atomic(path, contents).map_err(|e| InitError::Failed(format!("{}: {e}", path.display())))
}

/// The new project's journal, opened for writing (created). The generated
/// configuration sets no `journal.expect_head`, so there is no head to check.
fn open_journal(project: &Project) -> Result<SledJournal, InitError> {
    let dir = project.journal_dir();
    std::fs::create_dir_all(&dir).map_err(|e| InitError::Failed(format!("{}: {e}", dir.display())))?;
    emend_journal::open_writer(&dir, EngineProjector).map_err(InitError::Journal)
}

/// The backend a new project would use ([`emend_eval::open`]), its size in
/// questions; its errors name the flags that gave the bad input. A harness
/// command evaluates the starting strategy on the first question, so that a
/// command that cannot run, or writes what the protocol refuses, is found now
/// rather than by the first `emend evolve`.
fn open_backend(
    project: &Project,
    schema: &StrategySchema,
    start: &Artifact,
    request: &InitRequest,
) -> Result<usize, InitError> {
    let tasks = &request.tasks;
    let backend = emend_eval::open(project, schema).map_err(|e| {
        InitError::BadInput(match project.config.harness.kind {
            HarnessKind::Builtin => format!("--tasks {tasks}: {e}"),
            HarnessKind::Command => format!("--tasks {tasks} / --harness-command: {e}"),
        })
    })?;
    let questions = backend.questions();
    if let Some(argv) = &request.harness_command {
        let command = argv.join(" ");
        let Some((first, _)) = questions.first() else {
            return Err(InitError::BadInput(format!("--tasks {tasks}: no questions for `{command}` to answer")));
        };
        backend.evaluate(start, Some(std::slice::from_ref(first))).map_err(|e| {
            InitError::BadInput(format!(
                "--harness-command `{command}` failed on question {first} (the starting strategy, \
                 run once before anything is written): {e}"
            ))
        })?;
    }
    Ok(questions.len())
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| std::env::current_dir().map(|c| c.join(p)).unwrap_or_else(|_| p.to_path_buf()))
}

/// The project directory as an absolute path with symlinks resolved, as far as it
/// exists yet (init may create it), so that [`absolute`] files compare with it.
fn absolute_dir(dir: &Path) -> PathBuf {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut missing = Vec::new();
    let mut existing = dir.as_path();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => break,
        }
    }
    let mut out = std::fs::canonicalize(existing).unwrap_or_else(|_| existing.to_path_buf());
    out.extend(missing.iter().rev());
    out
}

/// The harness command as emend.yaml holds it. The command runs in the project
/// directory, so an argument naming an existing file or directory (as given,
/// from where the user stands) is rewritten relative to it; placeholders
/// (`{strategy}`), flags and anything else stay as typed. A program named
/// without a `/` (`python3`) is left to the PATH lookup.
fn relative_argv(argv: &[String], project_abs: &Path) -> Vec<String> {
    argv.iter()
        .enumerate()
        .map(|(i, arg)| {
            let path = Path::new(arg);
            let program_on_path = i == 0 && !arg.contains('/');
            if program_on_path || arg.contains('{') || arg.starts_with('-') || !path.exists() {
                return arg.clone();
            }
            let rel = artifact::relative_path(project_abs, &absolute(path));
            if i == 0 && !rel.contains('/') { format!("./{rel}") } else { rel }
        })
        .collect()
}

/// What `init` created, so that a failure leaves nothing behind: the whole directory
/// when it did not exist before, else only the files and directories init adds.
struct Created {
    dir_existed: bool,
    /// `.emend/` and its `.gitignore` (a cache, say, may be there already; the
    /// journal never is, the plan refuses that).
    state_existed: bool,
    gitignore_existed: bool,
    schema_existed: bool,
    config_schema_existed: bool,
    dir: PathBuf,
}

impl Created {
    fn new(dir: &Path) -> Self {
        Created {
            dir_existed: dir.exists(),
            state_existed: dir.join(config::STATE_DIR).exists(),
            gitignore_existed: dir.join(config::STATE_DIR).join(".gitignore").exists(),
            schema_existed: dir.join(artifact::PROJECT_SCHEMA_FILE).exists(),
            config_schema_existed: dir.join(config::CONFIG_SCHEMA_FILE).exists(),
            dir: dir.to_path_buf(),
        }
    }

    fn undo(self, project: &Project) {
        if !self.dir_existed {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        let _ = std::fs::remove_file(project.config_path());
        if self.state_existed {
            let _ = std::fs::remove_dir_all(project.journal_dir());
            if !self.gitignore_existed {
                let _ = std::fs::remove_file(self.dir.join(config::STATE_DIR).join(".gitignore"));
            }
        } else {
            let _ = std::fs::remove_dir_all(self.dir.join(config::STATE_DIR));
        }
        let schema = self.dir.join(artifact::PROJECT_SCHEMA_FILE);
        let config_schema = self.dir.join(config::CONFIG_SCHEMA_FILE);
        let removed_schema = !self.schema_existed && std::fs::remove_file(&schema).is_ok();
        let removed_config_schema = !self.config_schema_existed && std::fs::remove_file(&config_schema).is_ok();
        if (removed_schema || removed_config_schema)
            && let Some(parent) = schema.parent()
        {
            // Only if init's own schema/ directory is now empty.
            let _ = std::fs::remove_dir(parent);
        }
        let strategy = project.strategy_path();
        if std::fs::remove_file(&strategy).is_ok()
            && let Some(parent) = strategy.parent()
        {
            // Only if init's own strategies/ directory is now empty.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file and directory under `root`, with the files' bytes, sorted.
    fn tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                if path.is_dir() {
                    todo.push(path);
                    out.push((rel, None));
                } else {
                    out.push((rel, Some(std::fs::read(&path).unwrap())));
                }
            }
        }
        out.sort();
        out
    }

    fn request(dir: &Path, tasks: &str) -> InitRequest {
        InitRequest {
            dir: dir.to_path_buf(),
            tasks: tasks.to_string(),
            schema: None,
            strategy: None,
            harness_command: None,
            conversations: None,
        }
    }

    #[test]
    fn an_existing_project_is_refused_and_nothing_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(config::CONFIG_FILE), "mine\n").unwrap();
        let before = tree(tmp.path());
        let err = init(&request(&dir, "builtin")).unwrap_err();
        let InitError::BadInput(msg) = &err else { panic!("expected bad input, got {err}") };
        assert_eq!(
            msg,
            &format!("{}: already exists; refusing to overwrite a project", dir.join("emend.yaml").display())
        );
        assert_eq!(tree(tmp.path()), before);
    }

    #[test]
    fn a_different_schema_copy_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir_all(dir.join("schema")).unwrap();
        std::fs::write(dir.join(artifact::PROJECT_SCHEMA_FILE), "{}").unwrap();
        let before = tree(tmp.path());
        let err = init(&request(&dir, "builtin")).unwrap_err();
        assert!(
            matches!(&err, InitError::BadInput(m) if m.ends_with("already exists and differs from emend's schema; refusing to overwrite it")),
            "{err}"
        );
        assert_eq!(tree(tmp.path()), before);
    }

    #[test]
    fn a_failure_after_writing_began_leaves_the_directory_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir(&dir).unwrap();
        // A file where init puts its schema/ directory: emend.yaml is written, then
        // the configuration schema cannot be.
        std::fs::write(dir.join("schema"), "not a directory\n").unwrap();
        let before = tree(tmp.path());
        let err = init(&request(&dir, "builtin")).unwrap_err();
        let InitError::Failed(msg) = &err else { panic!("expected a failure, got {err}") };
        assert!(msg.starts_with(&format!("{}: ", dir.join("schema").display())), "{msg}");
        assert_eq!(tree(tmp.path()), before);
    }

    #[test]
    fn an_existing_journal_is_refused_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        init(&request(&dir, "builtin")).unwrap();
        // emend.yaml lost, the history kept: init must not write a new v1 over it.
        std::fs::remove_file(dir.join(config::CONFIG_FILE)).unwrap();
        let before = tree(tmp.path());
        let err = init(&request(&dir, "builtin")).unwrap_err();
        let InitError::BadInput(msg) = &err else { panic!("expected bad input, got {err}") };
        assert!(
            msg.starts_with(&format!("{}: a journal already exists", dir.join(".emend/journal").display())),
            "{msg}"
        );
        assert_eq!(tree(tmp.path()), before);
    }

    #[test]
    fn a_failure_keeps_a_state_directory_that_was_there() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir_all(dir.join(".emend/cache")).unwrap();
        std::fs::write(dir.join(".emend/cache/kept"), "cached\n").unwrap();
        // The served file's directory is a file: v1 is journaled, then serving it fails.
        std::fs::write(dir.join("strategies"), "not a directory\n").unwrap();
        assert!(init(&request(&dir, "builtin")).is_err());
        // What was there stays; what init wrote goes. (Opening the harness may
        // leave an empty stage-cache directory: a cache, `emend cache clear`'s.)
        assert_eq!(std::fs::read_to_string(dir.join(".emend/cache/kept")).unwrap(), "cached\n");
        for gone in [".emend/journal", ".emend/.gitignore", "emend.yaml", "schema"] {
            assert!(!dir.join(gone).exists(), "{gone} left behind");
        }
    }

    #[test]
    fn a_bad_task_set_names_the_flag_and_removes_the_new_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let tasks = tmp.path().join("tasks.json");
        std::fs::write(&tasks, "not json").unwrap();
        let dir = tmp.path().join("new/p");
        let before = tree(tmp.path());
        let err = init(&request(&dir, tasks.to_str().unwrap())).unwrap_err();
        let InitError::BadInput(msg) = &err else { panic!("expected bad input, got {err}") };
        assert!(msg.starts_with(&format!("--tasks {}: ", tasks.display())), "{msg}");
        assert!(!dir.exists());
        // The directory init created is removed; its parent, created on the way, is not.
        assert_eq!(tree(tmp.path()).into_iter().filter(|(p, _)| p != Path::new("new")).collect::<Vec<_>>(), before);
    }

    #[test]
    fn a_new_project_gets_its_files_and_v1() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let done = init(&request(&dir, "builtin")).unwrap();
        assert_eq!(done.tasks, "builtin");
        assert!(done.questions > 0);
        assert_eq!(done.schema_rel, None);
        assert_eq!(done.schema, dir.join(artifact::PROJECT_SCHEMA_FILE));
        assert_eq!(std::fs::read_to_string(&done.schema).unwrap(), schema::BUILTIN_SCHEMA);
        assert_eq!(std::fs::read_to_string(&done.config_schema).unwrap(), config::CONFIG_SCHEMA);
        assert!(done.config.is_file() && done.strategy.is_file() && done.journal.is_dir());
        assert_eq!(std::fs::read_to_string(dir.join(".emend/.gitignore")).unwrap(), STATE_GITIGNORE);
        assert_eq!(done.origin, "strategies/default.yaml (built in)");
        // A second init is refused.
        assert!(matches!(init(&request(&dir, "builtin")), Err(InitError::BadInput(_))));
    }

    #[test]
    fn harness_command_files_become_relative_to_the_project() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::write(root.join("adapter.py"), "").unwrap();
        std::fs::create_dir(root.join("p")).unwrap();
        std::fs::write(root.join("p/run.sh"), "").unwrap();
        let argv: Vec<String> =
            ["python3", root.join("adapter.py").to_str().unwrap(), "--out={out}", "{strategy}", "-v", "no-such-file"]
                .map(String::from)
                .into();
        assert_eq!(
            relative_argv(&argv, &root.join("p")),
            ["python3", "../adapter.py", "--out={out}", "{strategy}", "-v", "no-such-file"]
        );
        let argv: Vec<String> = vec![root.join("p/run.sh").display().to_string()];
        assert_eq!(relative_argv(&argv, &root.join("p")), ["./run.sh"]);
    }
}
