//! Injection-safe handlebars templates that produce Kubernetes objects.
//!
//! Rule packs render their output objects from `.yaml.hbs` templates. Tenant-controlled strings
//! (object names, labels, annotations…) are inserted into them, and must never be able to add
//! keys, change the structure or start a new YAML document — whatever they contain.
//!
//! # Why this is injection-proof
//!
//! Values never become YAML text. At registration every output expression `{{expr}}` is
//! rewritten (on handlebars' own parsed template, so positions and grammar are exactly
//! handlebars') into `{{__sy_value expr}}`. At render time that helper records the *typed* JSON
//! value in a per-render table and writes only an opaque ASCII token `__syv_<N>__`, which is a
//! valid plain scalar, quoted-scalar content or key in every YAML context. The rendered text is
//! therefore made of template source and tokens only: its YAML structure is decided by the
//! template author, whatever the tenant data. The text is then parsed as YAML and tokens are
//! replaced in the parsed tree, where a value can only ever be one node (a map or list value
//! becomes structure because the author put it there as a whole scalar), and substituted
//! values are never scanned for tokens again.
//!
//! Every way of writing a value as text is closed at registration: raw output (`{{{x}}}`,
//! `{{& x}}`) is refused, block helpers are limited to `if`/`unless`/`each`/`with`/`raw`
//! (which only render template text), helper and partial names must be static, and sources may
//! not contain the reserved `__sy` prefix.
//!
//! # Value semantics
//!
//! * A *plain* scalar that is exactly one `{{expr}}` is the typed value: `replicas: {{n}}` gives
//!   a number, `name: {{s}}` gives a string even if `s` is `"true"` or `"3"`, a map or a list is
//!   inserted as structure, null as null.
//! * A scalar mixing text and values (`pre-{{x}}`), and any quoted or block scalar
//!   (`"{{x}}"`, `'{{x}}'`, `|`), is a string: the concatenation of the text and of the
//!   values' text (strings as-is, numbers/booleans as JSON text, null as empty, maps and lists
//!   as compact JSON). Quoting a single value is thus the way to force a string.
//! * Values in mapping keys give string keys; duplicate keys are an error (a tenant key cannot
//!   silently replace a key written by the template).
//! * Plain scalars written by the author follow the YAML 1.2 core schema (`yes`/`on` are
//!   strings); `!!str` and `!` force a string, other tags are refused.
//! * Values in YAML comments simply disappear.
//! * Empty documents (from `---` separators or an `{{#if}}` that renders nothing) are dropped;
//!   every other document must be a mapping.
//! * Template and partial sources are treated as ending with a newline, so a partial placed
//!   alone on an indented line (handlebars indents every line of it) never runs into the next
//!   line.
//!
//! # Helpers
//!
//! Handlebars' defaults (`if`, `unless`, `each`, `with`, `lookup`, `eq`, `ne`, `gt`, `gte`,
//! `lt`, `lte`, `and`, `or`, `not`, `len`, `log`, `raw`), plus:
//! * `{{toJson x}}`: the same as `{{x}}` (values are always inserted by type);
//! * `{{default x fallback}}`: `x` unless it is missing, null or `""`;
//! * `{{join list sep}}`: the items' text joined with `sep` (default `,`);
//! * `{{lower s}}`, `{{upper s}}`, `{{trunc s 63}}` (a negative length keeps the end);
//! * `{{decide "table" key=value …}}`: calls the [`Decider`] given to [`TemplateSet::new`].
//!
//! Rendering is strict: an expression naming a variable that does not exist is an error with
//! the template's file, line and column. `{{#if x}}`, `{{#unless x}}`, `{{#each x}}` and
//! `{{#with x}}` accept a missing `x` (false / nothing to iterate), so optional values are used
//! through them.
//!
//! # Limits
//!
//! Handlebars recurses on nesting, so registration refuses what could overflow the stack:
//! blocks nested more than 64 deep in a file, expressions nested more than 32 deep, any cycle
//! of partials (`template::recursion`, naming the cycle), more than 100 levels of blocks and
//! partials along one render, and more than 1,000 partial expansions in one render
//! (`template::depth`). Handlebars' parse is quadratic in a file's tags, so the parsing work
//! of a set's templates together is bounded too. See `limits`.
//!
//! # Compiled structure
//!
//! The text described above is the reference. Templates render, when they can, from their
//! compiled structure instead (see `structure` and `fill`): the YAML tree the text would
//! parse into, with its values and blocks as nodes, filled without writing or parsing text.
//! The fill gives up wherever the text would fail, so results and errors are the text's;
//! what cannot be compiled renders as text ([`TemplateSet::text_rendered`] says which).
//!
//! # Parsing once
//!
//! When a template renders as text, the rendered text holds template source and tokens only, so renders that take the same
//! branches and iterate the same number of times produce the same text whatever the values.
//! Each distinct text is parsed once into a skeleton (see `skeleton`) that later renders of
//! that text fill with their values, giving exactly what parsing would; text that does not
//! parse, and values that make it invalid (a duplicate key), go through the parse for its
//! error message.

mod context;
mod decode;
mod edit;
#[cfg(test)]
mod edit_tests;
mod fill;
mod helpers;
mod limits;
mod paths;
mod skeleton;
mod structure;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, OnceLock};

use handlebars::template::{Parameter, Subexpression, Template, TemplateElement};
use handlebars::{Handlebars, Path, RenderError, RenderErrorReason};
use serde_json::Value;

pub use context::{CelMap, Held, RenderContext};
pub use edit::TemplateEdit;
pub use helpers::Decider;
use helpers::{BLOCK_HELPERS, RESERVED_PREFIX, VALUE_HELPER, ValueTable, is_known_helper};
pub use paths::TemplatePath;

/// An error registering or rendering a template. Displays as `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {}", .file, Position(*.line, *.column), .message)]
pub struct TemplateError {
    /// The diagnostic code: `template::syntax` for what the source may not say,
    /// `template::recursion` for a cycle of partials, `template::depth` for nesting or
    /// expansion past the limits, `template::render` for a failed render.
    pub code: &'static str,
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

/// `:line:col`, `:line` or nothing.
struct Position(Option<usize>, Option<usize>);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(line), Some(col)) => write!(f, ":{line}:{col}"),
            (Some(line), None) => write!(f, ":{line}"),
            _ => Ok(()),
        }
    }
}

impl TemplateError {
    fn at(file: &str, pos: Option<(usize, usize)>, message: impl Into<String>) -> Self {
        TemplateError {
            code: CODE_SYNTAX,
            file: file.to_owned(),
            line: pos.map(|p| p.0),
            column: pos.map(|p| p.1),
            message: message.into(),
        }
    }
}

const CODE_SYNTAX: &str = "template::syntax";
const CODE_RENDER: &str = "template::render";
const CODE_NOT_FOUND: &str = "template::not-found";

/// The templates and partials of a rule pack (plus shared partials), ready to render.
#[derive(Clone)]
pub struct TemplateSet {
    registry: Handlebars<'static>,
    /// Registered name → file, for error messages.
    files: HashMap<String, String>,
    /// Names registered with [`TemplateSet::add_template`].
    templates: HashSet<String>,
    /// Which partials each registered template includes, to refuse recursion and depth.
    includes: limits::Graph,
    /// The parsing work of every registration so far (see `limits::prescan`).
    parse_work: u64,
    /// Rendered texts parsed once (see `skeleton`), shared by clones.
    skeletons: Arc<skeleton::SkeletonCache>,
    /// The `decide` helper's decision tables, for the structural render.
    decider: Option<Decider>,
    /// Each template's structure (see `structure`), compiled when first needed after the last
    /// registration.
    structures: Arc<OnceLock<Structures>>,
}

/// Each renderable template's structure, or why it renders as text.
type Structures = HashMap<String, Result<Arc<structure::Structure>, structure::Unstructured>>;

/// The code of the note that a template renders as text.
pub const CODE_TEXT_RENDER: &str = "template::text-render";

impl fmt::Debug for TemplateSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.files.keys().collect();
        names.sort();
        f.debug_struct("TemplateSet")
            .field("names", &names)
            .finish()
    }
}

impl Default for TemplateSet {
    fn default() -> Self {
        TemplateSet::new(None)
    }
}

impl TemplateSet {
    /// An empty set; `decider` serves the `decide` helper (without one, `decide` is an error).
    #[must_use]
    pub fn new(decider: Option<Decider>) -> Self {
        let mut registry = Handlebars::new();
        registry.set_strict_mode(true);
        registry.register_escape_fn(handlebars::no_escape);
        helpers::register(&mut registry, decider.clone());
        TemplateSet {
            registry,
            files: HashMap::new(),
            templates: HashSet::new(),
            includes: limits::Graph::default(),
            parse_work: 0,
            skeletons: Arc::default(),
            decider,
            structures: Arc::default(),
        }
    }

    /// Registers a partial usable as `{{> name}}`.
    ///
    /// # Errors
    /// Handlebars syntax errors, and constructs that could write a value as text (raw output,
    /// value helpers in block form, dynamic helper or partial names, unknown helpers, the
    /// reserved `__sy` prefix), at their position in `file`.
    pub fn add_partial(
        &mut self,
        name: &str,
        file: &str,
        source: &str,
    ) -> Result<(), TemplateError> {
        self.register(name, file, source, false)
    }

    /// Registers a template (also usable as a partial under the same name).
    ///
    /// # Errors
    /// As [`TemplateSet::add_partial`].
    pub fn add_template(
        &mut self,
        name: &str,
        file: &str,
        source: &str,
    ) -> Result<(), TemplateError> {
        self.register(name, file, source, true)
    }

    fn register(
        &mut self,
        name: &str,
        file: &str,
        source: &str,
        renderable: bool,
    ) -> Result<(), TemplateError> {
        let template = compile(name, file, source, &mut self.parse_work)?;
        self.includes
            .register(name, file, &template)
            .map_err(|(code, pos, message)| TemplateError {
                code,
                ..TemplateError::at(file, pos, message)
            })?;
        self.registry.register_template(name, template);
        self.files.insert(name.to_owned(), file.to_owned());
        if renderable {
            self.templates.insert(name.to_owned());
        } else {
            self.templates.remove(name);
        }
        // Any template may include this one: compile them all again when next needed.
        self.structures = Arc::default();
        Ok(())
    }

    fn structures(&self) -> &Structures {
        self.structures.get_or_init(|| {
            let compiler = structure::Compiler::new(&self.registry, &self.files);
            self.templates
                .iter()
                .map(|name| (name.clone(), compiler.compile(name).map(Arc::new)))
                .collect()
        })
    }

    /// The templates that render as text rather than from their compiled structure, each
    /// with the construct that keeps it from being compiled (`template::text-render`): what
    /// `switchyard check` notes. They render the same either way, only slower.
    #[must_use]
    pub fn text_rendered(&self) -> Vec<TemplateError> {
        let broken = self.calls_missing_partials();
        let mut out: Vec<(&String, TemplateError)> = self
            .structures()
            .iter()
            .filter(|(name, _)| !broken.contains(*name))
            .filter_map(|(name, s)| s.as_ref().err().map(|u| (name, u)))
            .map(|(name, u)| {
                (
                    name,
                    TemplateError {
                        code: CODE_TEXT_RENDER,
                        file: u.file.clone(),
                        line: u.position.map(|p| p.0),
                        column: u.position.map(|p| p.1),
                        message: format!(
                            "template `{name}` renders as text, not from compiled structure: {}",
                            u.reason
                        ),
                    },
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out.into_iter().map(|(_, e)| e).collect()
    }

    /// Every `{{> name}}` whose partial is not registered (no template, shared partial or
    /// inline partial of that name), at its position: each would fail every render, so they
    /// are load errors (`template::not-found`), with the nearest known name as a suggestion.
    #[must_use]
    pub fn missing_partials(&self) -> Vec<TemplateError> {
        let known: Vec<String> = self.includes.names().map(str::to_owned).collect();
        self.includes
            .missing_partials()
            .into_iter()
            .map(|(_, file, pos, name)| {
                let hint = switchyard_cel::check::suggest(&name, known.iter())
                    .map(|m| format!(" (did you mean `{m}`?)"))
                    .unwrap_or_default();
                TemplateError {
                    code: CODE_NOT_FOUND,
                    ..TemplateError::at(
                        &file,
                        Some(pos),
                        format!(
                            "partial `{name}` not found: no template, shared partial or inline \
                             partial has that name{hint}"
                        ),
                    )
                }
            })
            .collect()
    }

    /// Templates that call a partial nobody defines: they have a load error already, and no
    /// structure to note.
    fn calls_missing_partials(&self) -> HashSet<String> {
        self.includes
            .missing_partials()
            .into_iter()
            .map(|(owner, ..)| owner)
            .collect()
    }

    pub fn has_template(&self, name: &str) -> bool {
        self.templates.contains(name)
    }

    /// Root-anchored variable paths the template reads outside any block that changes the
    /// context (`#each`/`#with`), plus every `@root.` path anywhere, with their 1-based
    /// line/column in the template's file (the position of the `{{…}}` that reads them).
    ///
    /// Partials included with the current context are followed; their paths are reported at
    /// the position of the `{{> partial}}` call. Used by `switchyard check` to report a template
    /// referencing a variable that does not exist.
    #[must_use]
    pub fn referenced_paths(&self, name: &str) -> Vec<TemplatePath> {
        if !self.templates.contains(name) {
            return Vec::new();
        }
        paths::referenced_paths(&self.registry, name)
    }

    /// Renders the template and returns its YAML documents as JSON values, values substituted.
    ///
    /// # Errors
    /// An unknown template; a render error (missing variable, helper or decider failure) at
    /// its line and column in the template or partial file; rendered output that is not YAML,
    /// or a document that is not a mapping (no position: the rendered line is in the message).
    pub fn render(&self, name: &str, context: &Value) -> Result<Vec<Value>, TemplateError> {
        self.render_in(name, &RenderContext::of(context))
    }

    /// [`TemplateSet::render`] with a context built once and reused across renders.
    ///
    /// A template compiled into structure (see `structure`) renders by filling it; one that
    /// could not be, or whose values would make the text fail, renders as text: handlebars
    /// writes it with value tokens, the text is parsed (once per distinct text, see
    /// `skeleton`) and the values put in, which gives the same documents, or the error.
    pub fn render_in(
        &self,
        name: &str,
        context: &RenderContext<'_>,
    ) -> Result<Vec<Value>, TemplateError> {
        let file = match self.files.get(name) {
            Some(file) if self.templates.contains(name) => file,
            _ => {
                return Err(TemplateError::at(
                    name,
                    None,
                    format!("template `{name}` not found"),
                ));
            }
        };
        if let Some((documents, decided)) = self.fill(name, context) {
            // Debug builds (the tests) check the structure against the text, unless that
            // would ask the decision tables twice.
            if cfg!(debug_assertions) && !decided {
                self.assert_agrees(name, file, context, &documents);
            }
            return Ok(documents);
        }
        self.render_text(name, file, context)
    }

    /// Template `name` filled from its structure, and whether that asked the decision
    /// tables; `None` without a structure or where the text must render.
    fn fill(&self, name: &str, context: &RenderContext<'_>) -> Option<(Vec<Value>, bool)> {
        let Some(Ok(structure)) = self.structures().get(name) else {
            return None;
        };
        let filler = fill::Filler::new(context, self.decider.as_ref());
        let documents = filler.documents(structure).ok()?;
        Some((documents, filler.decided()))
    }

    fn assert_agrees(
        &self,
        name: &str,
        file: &str,
        context: &RenderContext<'_>,
        documents: &[Value],
    ) {
        let text = self.render_text(name, file, context);
        assert!(
            text.as_deref() == Ok(documents),
            "{file}: the structural render disagrees with the text render:\n  structure: {documents:?}\n  text: {text:?}"
        );
    }

    /// Renders template `name` as text and decodes it.
    fn render_text(
        &self,
        name: &str,
        file: &str,
        context: &RenderContext<'_>,
    ) -> Result<Vec<Value>, TemplateError> {
        let table = ValueTable::begin();
        let text = {
            let mut cached = context.text.borrow_mut();
            let data = cached.get_or_insert_with(|| handlebars::Context::from(context.to_value()));
            self.registry
                .render_with_context(name, data)
                .map_err(|e| self.render_error(&e, file))?
        };
        let values = table.finish();
        // The same text always has the same structure: fill its skeleton when it has one;
        // decode the text (for its exact error) when it has none or the values break it.
        let values = match self.skeletons.get(&text) {
            Some(skeleton) => match skeleton.fill(values) {
                Ok(documents) => return Ok(documents),
                Err(values) => values,
            },
            None => values,
        };
        decode::decode(&text, &values).map_err(|message| TemplateError::at(file, None, message))
    }

    /// [`TemplateSet::render`] through the text only, never the structure: what the
    /// structural render must agree with.
    pub fn render_as_text(&self, name: &str, context: &Value) -> Result<Vec<Value>, TemplateError> {
        let file = self.files.get(name).map_or(name, String::as_str);
        self.render_text(name, file, &RenderContext::of(context))
    }

    /// Template `name` rendered from its compiled structure only: `None` when it has none,
    /// or when these values need the text render (which [`TemplateSet::render`] then does:
    /// for an error, or a case the structure leaves to the text). For tests comparing the
    /// two renders.
    #[must_use]
    pub fn render_structured(&self, name: &str, context: &Value) -> Option<Vec<Value>> {
        self.fill(name, &RenderContext::of(context))
            .map(|(documents, _)| documents)
    }

    /// What the edit from `previous` (the set before a reload) changes in templates
    /// `names`, trigger by trigger (see [`TemplateEdit`]). A template that renders as text
    /// before or after changes every trigger unless no template or partial changed at all;
    /// one that is in only one of the sets changes every trigger.
    #[must_use]
    pub fn edit_since(&self, previous: &TemplateSet, names: &[&str]) -> TemplateEdit {
        let mut edit = TemplateEdit::default();
        let (before, after) = (previous.structures(), self.structures());
        for name in names {
            match (before.get(*name), after.get(*name)) {
                (Some(Ok(old)), Some(Ok(new))) => edit.structure(old, new),
                (Some(_), Some(_))
                    if previous.registry.get_templates() == self.registry.get_templates() => {}
                _ => return TemplateEdit::everywhere(),
            }
        }
        edit
    }

    /// Whether template `name` renders from compiled structure (else as text).
    #[must_use]
    pub fn is_structured(&self, name: &str) -> bool {
        matches!(self.structures().get(name), Some(Ok(_)))
    }

    fn render_error(&self, e: &RenderError, default_file: &str) -> TemplateError {
        let file = e
            .template_name
            .as_ref()
            .and_then(|n| self.files.get(n))
            .map_or(default_file, String::as_str);
        let message = match e.reason() {
            RenderErrorReason::MissingVariable(Some(path)) => {
                format!("variable `{path}` not found")
            }
            RenderErrorReason::MissingVariable(None) => "variable not found".to_owned(),
            RenderErrorReason::TemplateNotFound(n) => format!("template `{n}` not found"),
            RenderErrorReason::PartialNotFound(n) => format!("partial `{n}` not found"),
            RenderErrorReason::HelperNotFound(n) => format!("helper `{n}` not found"),
            RenderErrorReason::PartialBlockNotFound => {
                "`{{> @partial-block}}` used outside a partial block".to_owned()
            }
            RenderErrorReason::CannotIncludeSelf => "a partial cannot include itself".to_owned(),
            RenderErrorReason::ParamNotFoundForIndex(helper, idx) => format!(
                "helper `{helper}`: parameter {} is missing or names a variable that does not exist",
                idx + 1
            ),
            RenderErrorReason::Other(message) => message.clone(),
            other => lowercase_first(&other.to_string()),
        };
        TemplateError {
            code: CODE_RENDER,
            file: file.to_owned(),
            line: e.line_no,
            column: e.column_no,
            message,
        }
    }
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// 1-based line and column (in characters) of byte offset `offset` in `source`.
fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Parses `source` with handlebars and applies the value rewrite (see the module docs).
fn compile(
    name: &str,
    file: &str,
    source: &str,
    parse_work: &mut u64,
) -> Result<Template, TemplateError> {
    // Handlebars parses (and later renders and drops) nesting recursively: bound it before
    // it sees the source, so a deep template is an error, not a stack overflow.
    let work = match limits::prescan(source) {
        Ok(work) => work,
        Err((offset, message)) => {
            return Err(TemplateError {
                code: limits::CODE_DEPTH,
                ..TemplateError::at(file, Some(line_col(source, offset)), message)
            });
        }
    };
    // ... and its parse is quadratic in a file's tags: bound the work of the whole set.
    *parse_work = parse_work.saturating_add(work);
    if *parse_work > limits::MAX_PARSE_WORK {
        return Err(TemplateError {
            code: limits::CODE_DEPTH,
            ..TemplateError::at(
                file,
                None,
                "the templates are too large for handlebars to parse in reasonable time (it \
                 counts lines from the start of a file for every tag): split large templates \
                 into partials",
            )
        });
    }
    if let Some(offset) = source.find(RESERVED_PREFIX) {
        return Err(TemplateError::at(
            file,
            Some(line_col(source, offset)),
            format!("`{RESERVED_PREFIX}` is reserved and may not appear in a template"),
        ));
    }
    // A partial alone on its line replaces the whole line, its own newline included: a source
    // without a final newline would run into the next line (`a: 1  b: 2`, silently one value).
    // Treat every source as ending with a newline, as files normally do.
    let source: Cow<'_, str> = if source.is_empty() || source.ends_with('\n') {
        Cow::Borrowed(source)
    } else {
        Cow::Owned(format!("{source}\n"))
    };
    // Handlebars' parser has internal `unwrap`s; make sure a malformed pack cannot bring the
    // process down.
    let parsed = std::panic::catch_unwind(|| Template::compile_with_name(&source, name.to_owned()))
        .map_err(|_| TemplateError::at(file, None, "handlebars failed to parse this template"))?;
    let mut template = parsed
        .map_err(|e| TemplateError::at(file, e.pos(), lowercase_first(&e.reason().to_string())))?;
    rewrite(&mut template, (1, 1))
        .map_err(|(pos, message)| TemplateError::at(file, Some(pos), message))?;
    Ok(template)
}

type RewriteError = ((usize, usize), String);

/// Rewrites `t` in place: every output expression becomes `__sy_value <value>`, and
/// everything that could write a value as text is refused.
fn rewrite(t: &mut Template, fallback: (usize, usize)) -> Result<(), RewriteError> {
    let mapping = &t.mapping;
    for (idx, el) in t.elements.iter_mut().enumerate() {
        let pos = match mapping.get(idx) {
            Some(m) => (m.0, m.1),
            None => fallback,
        };
        let fail = |message: String| Err((pos, message));
        match el {
            TemplateElement::RawString(_) | TemplateElement::Comment(_) => {}
            TemplateElement::HtmlExpression(_) => {
                return fail(
                    "raw output (`{{{…}}}` or `{{&…}}`) is not allowed: values are inserted as \
                     typed YAML values, write `{{…}}`"
                        .to_owned(),
                );
            }
            TemplateElement::Expression(ht) => {
                check_params(&ht.params, &ht.hash).map_err(|m| (pos, m))?;
                let name = std::mem::replace(&mut ht.name, Parameter::Name(VALUE_HELPER.into()));
                let params = std::mem::take(&mut ht.params);
                let hash = std::mem::take(&mut ht.hash);
                let value = if params.is_empty() && hash.is_empty() {
                    match name {
                        // `{{helper}}` without arguments calls the helper, as in handlebars.
                        Parameter::Path(Path::Relative((_, raw))) if is_known_helper(&raw) => {
                            Parameter::Subexpression(Subexpression::new(
                                Parameter::Name(raw),
                                Vec::new(),
                                HashMap::new(),
                            ))
                        }
                        Parameter::Subexpression(sub) => {
                            check_subexpression(&sub).map_err(|m| (pos, m))?;
                            Parameter::Subexpression(sub)
                        }
                        other => other,
                    }
                } else {
                    let helper = match &name {
                        Parameter::Name(n) => n.clone(),
                        _ => return fail("helper names must be static".to_owned()),
                    };
                    if !is_known_helper(&helper) {
                        return fail(format!("unknown helper `{helper}`"));
                    }
                    if helper == "log" {
                        // `log` writes nothing: keep it as it is.
                        ht.name = name;
                        ht.params = params;
                        ht.hash = hash;
                        continue;
                    }
                    Parameter::Subexpression(Subexpression::new(name, params, hash))
                };
                ht.params = vec![value];
            }
            TemplateElement::HelperBlock(ht) => {
                let helper = match &ht.name {
                    Parameter::Name(n) => n.as_str(),
                    _ => return fail("helper names must be static".to_owned()),
                };
                if !BLOCK_HELPERS.contains(&helper) {
                    return fail(format!(
                        "`{{{{#{helper}}}}}` is not allowed: the block helpers are `if`, \
                         `unless`, `each`, `with` and `raw`"
                    ));
                }
                let optional_context = helper == "each" || helper == "with";
                check_params(&ht.params, &ht.hash).map_err(|m| (pos, m))?;
                // In strict mode `#each`/`#with` on a missing or empty value fail unless they
                // have an `{{else}}`; an empty one keeps them usable on optional values.
                if optional_context && ht.inverse.is_none() {
                    ht.inverse = Some(Template::new());
                }
                for inner in [&mut ht.template, &mut ht.inverse].into_iter().flatten() {
                    rewrite(inner, pos)?;
                }
            }
            TemplateElement::PartialExpression(dt) | TemplateElement::PartialBlock(dt) => {
                if matches!(dt.name, Parameter::Subexpression(_)) {
                    return fail("partial names must be static".to_owned());
                }
                check_params(&dt.params, &dt.hash).map_err(|m| (pos, m))?;
                // A partial called with parameters sees only them (and `@root`), like a
                // function: handlebars would otherwise copy the whole render context (the
                // trigger, every variable, the tables) into each such call.
                if dt.params.is_empty() && !dt.hash.is_empty() {
                    dt.params
                        .push(Parameter::Literal(Value::Object(serde_json::Map::new())));
                }
                if let Some(inner) = &mut dt.template {
                    rewrite(inner, pos)?;
                }
            }
            TemplateElement::DecoratorExpression(dt) | TemplateElement::DecoratorBlock(dt) => {
                if !matches!(&dt.name, Parameter::Name(n) if n == "inline") {
                    return fail("the only decorator is `*inline`".to_owned());
                }
                check_params(&dt.params, &dt.hash).map_err(|m| (pos, m))?;
                if let Some(inner) = &mut dt.template {
                    rewrite(inner, pos)?;
                }
            }
            _ => return fail("unsupported template element".to_owned()),
        }
    }
    Ok(())
}

fn check_params(params: &[Parameter], hash: &HashMap<String, Parameter>) -> Result<(), String> {
    for p in params.iter().chain(hash.values()) {
        if let Parameter::Subexpression(sub) = p {
            check_subexpression(sub)?;
        }
    }
    Ok(())
}

/// A subexpression must call a known helper by a static name.
fn check_subexpression(sub: &Subexpression) -> Result<(), String> {
    let TemplateElement::Expression(ht) = sub.as_element() else {
        return Err("unsupported subexpression".to_owned());
    };
    let helper = match &ht.name {
        Parameter::Name(n) | Parameter::Path(Path::Relative((_, n))) => n,
        _ => return Err("helper names must be static".to_owned()),
    };
    if !is_known_helper(helper) {
        return Err(format!("unknown helper `{helper}`"));
    }
    check_params(&ht.params, &ht.hash)
}
