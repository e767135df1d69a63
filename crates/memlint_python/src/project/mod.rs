//! The project around a file: what other modules need to know of one module
//! ([`ModuleSummary`]), the question the semantic model asks about the names a module
//! imports ([`ProjectIndex`]), and the resolution of those names through the project's
//! modules ([`ProjectResolver`]: re-exports, star imports, base classes, factories),
//! over a [`ModuleLoader`] that the front ends implement (they do the I/O; nothing here
//! reads a file).
//!
//! Names are resolved as the linted module spells them through its imports: after
//! `from .models import Generator`, `Generator` is `.models.Generator`; after
//! `from . import nets`, `nets.Net` is `.nets.Net`; after `from nets import *`, a name the
//! module does not bind is looked up in `nets`.
//!
//! The files, lowest layer first. The summary types (in `summary`) are shared by all;
//! `summary` and `calls` ask each other (the summary's walk asks for the module's calls,
//! which read its imports and definitions from the summary); `resolve` is the only one
//! that looks at other modules:
//! - `syntax`: readings of single nodes (dotted names, gradient-disabling calls and
//!   decorators, backward passes, the callee an expression is built by);
//! - `definitions`: the summary of one function or class from its body;
//! - `calls`: a module's calls of imported names, with their gradient context;
//! - `summary`: the summary types and the walk that builds a module's summary;
//! - `index`: what the semantic model asks ([`ProjectIndex`], [`Symbol`]) and where
//!   modules come from ([`ModuleLoader`]);
//! - `resolve`: [`ProjectResolver`], the answers, through the project's modules;
//! - `scan`: the imports of a text by a line scan, for the linter's pre-filter.

mod calls;
mod definitions;
mod index;
mod resolve;
mod scan;
mod summary;
mod syntax;

pub use crate::library::{library_module_class, library_module_factory};
pub(crate) use definitions::{class_summary_in, returned_parameter};
pub(crate) use syntax::parameter_free_stores;
pub use index::{symbol_matters, ModuleLoader, NoProject, ProjectIndex, Returned, Symbol, SymbolAnswer};
pub use resolve::ProjectResolver;
pub use scan::{scan_imports, ScannedImport};
pub use summary::{forward_runs_submodules_without_grad, join_import, method_runs_forward, ClassSummary, FunctionSummary, ImportedCall, ModuleSummary, PretrainedCall, StoreKind, StoredArgument};
