//! A small command-line parser shared by the example binaries: `--flag
//! VALUE` options and `--switch` flags, as the C and C++ examples take them.

use std::collections::HashMap;
use std::str::FromStr;

/// What went wrong, or that help was asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum CliError {
    /// `-h` or `--help`: print the usage and exit 0.
    Help,
    /// A usage error: print it and the usage, exit 2.
    Usage(String),
}

/// Parsed arguments.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, String>,
    switches: Vec<String>,
}

impl Args {
    /// Parses `args` (without the program name). `options` take a value,
    /// `switches` do not; anything else is a usage error.
    pub fn parse<I>(args: I, options: &[&str], switches: &[&str]) -> Result<Args, CliError>
    where
        I: IntoIterator<Item = String>,
    {
        let mut out = Args::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            if arg == "-h" || arg == "--help" {
                return Err(CliError::Help);
            }
            if switches.contains(&arg.as_str()) {
                out.switches.push(arg);
            } else if options.contains(&arg.as_str()) {
                let Some(value) = it.next() else {
                    return Err(CliError::Usage(format!("missing value for {arg}")));
                };
                out.values.insert(arg, value);
            } else {
                return Err(CliError::Usage(format!("unknown option: {arg}")));
            }
        }
        Ok(out)
    }

    /// The value of `flag`, if given.
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.values.get(flag).map(String::as_str)
    }

    /// The value of `flag`, or a usage error saying it is required.
    pub fn required(&self, flag: &str) -> Result<&str, CliError> {
        self.value(flag)
            .ok_or_else(|| CliError::Usage(format!("{flag} is required")))
    }

    /// Whether the switch was given.
    pub fn switch(&self, flag: &str) -> bool {
        self.switches.iter().any(|s| s == flag)
    }

    /// The integer value of `flag` in `[lo, hi]`, or `default` if absent.
    pub fn int<T>(&self, flag: &str, lo: T, hi: T, default: T) -> Result<T, CliError>
    where
        T: FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        let Some(s) = self.value(flag) else {
            return Ok(default);
        };
        match s.parse::<T>() {
            Ok(v) if v >= lo && v <= hi => Ok(v),
            _ => Err(CliError::Usage(format!(
                "{flag} wants an integer in [{lo}, {hi}], got \"{s}\""
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, CliError> {
        Args::parse(
            v.iter().map(|s| s.to_string()),
            &["--url", "--envs"],
            &["--quiet"],
        )
    }

    #[test]
    fn options_switches_and_errors() {
        let a = parse(&["--url", "ws://x", "--quiet", "--envs", "4"]).unwrap();
        assert_eq!(a.value("--url"), Some("ws://x"));
        assert!(a.switch("--quiet"));
        assert_eq!(a.int("--envs", 1, 999, 3), Ok(4));
        assert_eq!(a.int("--missing", 1, 999, 3), Ok(3));
        assert!(matches!(
            a.int("--envs", 5, 999, 3),
            Err(CliError::Usage(_))
        ));
        assert_eq!(parse(&["--help"]).unwrap_err(), CliError::Help);
        assert!(matches!(parse(&["--url"]), Err(CliError::Usage(_))));
        assert!(matches!(parse(&["--bogus"]), Err(CliError::Usage(_))));
        assert!(matches!(
            parse(&[]).unwrap().required("--url"),
            Err(CliError::Usage(_))
        ));
    }
}
