//! steplens output formats, shared by the CLI and the viewer: the report as terminal text,
//! Markdown and a self-contained HTML page ([`text`], [`html`]); the diff ([`diff`]); the
//! regression check as text, Markdown, JUnit XML and GitHub annotations ([`check`]); and the
//! trace summary of `steplens info` ([`info`]). Everything
//! renders from the analysis' types; nothing here reads files.

pub mod check;
pub mod diff;
pub mod html;
pub mod info;
mod steps;
pub mod table;
pub mod text;
pub mod views;
