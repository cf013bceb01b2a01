//! steplens output formats, shared by the CLI and the viewer: the report as terminal text,
//! Markdown and a self-contained HTML page ([`text`], [`html`]); the diff ([`diff`]); the
//! regression check as text, Markdown, JUnit XML and GitHub annotations ([`check`]); and the
//! trace summary of `steplens info` ([`info`]). Everything
//! renders from the analysis' types; nothing here reads files. What the trace named (ops,
//! files, titles) is escaped for the terminal and for Markdown ([`escape`]).

pub mod check;
mod count;
pub mod diff;
pub mod escape;
pub mod html;
pub mod info;
mod steps;
pub use steps::step_count;
pub mod table;
pub mod text;
pub mod views;
