//! The front end's own error: what is wrong with a PTX text, and where.

/// A PTX text the front end cannot read (malformed syntax, a declaration it cannot lay out,
/// an instruction the host engine does not run): the 1-based PTX line and the function or
/// kernel where known, and what is wrong.
///
/// Its `Display` reads ``in `name`, PTX line N: message`` (parts that are not known are left
/// out). A loader reports it as its platform's kernel-load error with this text as the detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxError {
    line: Option<usize>,
    function: Option<String>,
    message: String,
}

impl PtxError {
    /// An error at `line` (1-based) in `function` (`None`: at module scope or not known).
    pub(super) fn new(
        line: Option<usize>,
        function: Option<&str>,
        message: impl std::fmt::Display,
    ) -> Self {
        PtxError {
            line,
            function: function.map(str::to_string),
            message: message.to_string(),
        }
    }

    /// The 1-based PTX line, where the error has one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The function or kernel the error is in, where known (`None` at module scope).
    pub fn function(&self) -> Option<&str> {
        self.function.as_deref()
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for PtxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.function, self.line) {
            (Some(func), Some(line)) => write!(f, "in `{func}`, PTX line {line}: ")?,
            (Some(func), None) => write!(f, "in `{func}`: ")?,
            (None, Some(line)) => write!(f, "PTX line {line}: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for PtxError {}

/// Shorthand for the front end's results.
pub(super) type Result<T> = std::result::Result<T, PtxError>;

/// A layout or decoding error in `kernel` (`None`: module data), at `line` where there is one.
pub(super) fn load_error(
    kernel: Option<&str>,
    line: Option<u32>,
    detail: impl std::fmt::Display,
) -> PtxError {
    PtxError::new(line.map(|l| l as usize), kernel, detail)
}

#[cfg(test)]
mod tests {
    use super::PtxError;

    #[test]
    fn display_names_what_is_known() {
        let e = PtxError::new(Some(7), Some("k"), "`foo` is not supported");
        assert_eq!(e.to_string(), "in `k`, PTX line 7: `foo` is not supported");
        assert_eq!(
            (e.line(), e.function(), e.message()),
            (Some(7), Some("k"), "`foo` is not supported")
        );
        assert_eq!(
            PtxError::new(Some(2), None, "bad").to_string(),
            "PTX line 2: bad"
        );
        assert_eq!(
            PtxError::new(None, Some("k"), "bad").to_string(),
            "in `k`: bad"
        );
        assert_eq!(PtxError::new(None, None, "bad").to_string(), "bad");
    }
}
