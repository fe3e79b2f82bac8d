//! [`Observation`]: one batch of observations, borrowed from the caller.

use std::ffi::CString;
use std::os::raw::c_char;

use plugrl_sys as sys;

use crate::element::sealed::Sealed;
use crate::element::{Data, Element};
use crate::Error;

/// One batch of observations (SPEC 5.2, `plugrl_observation`): named images
/// (`u8`, shape `[n, height, width, channels]`), named states (any
/// [`Element`], shape `[n, ...]`; `f64` is the convention) and optional
/// text, one string per env. The leading dimension `n` is the number of
/// envs in the batch.
///
/// It borrows the arrays (`'a`) and copies names, shapes and text. Every
/// array's length is checked against its shape when it is added, so the
/// library never reads past a slice. An observation is cheap to build: a
/// loop that changes its arrays in place builds a new one each step.
///
/// ```
/// # fn main() -> Result<(), plugrl::Error> {
/// let (t, a) = (vec![0.0f64; 3], vec![0.0f64; 3 * 2]);
/// let mut obs = plugrl::Observation::new();
/// obs.state("t", &t, &[3, 1])?.state("a", &a, &[3, 2])?;
/// obs.text(&["env 0", "env 1", "env 2"])?;
/// assert_eq!(obs.num_states(), 2);
///
/// // A shape that does not fit the data is refused before any call.
/// assert!(obs.state("a", &a, &[3, 3]).is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Observation<'a> {
    images: Vec<Entry<'a>>,
    states: Vec<Entry<'a>>,
    text: Option<Vec<CString>>,
    text_as_strings: bool,
}

#[derive(Debug, Clone)]
struct Entry<'a> {
    name: CString,
    data: Data<'a>,
    shape: Vec<i64>,
}

impl Entry<'_> {
    fn raw(&self, dtype: sys::plugrl_dtype) -> sys::plugrl_array {
        sys::plugrl_array {
            name: self.name.as_ptr(),
            data: self.data.as_ptr(),
            dtype,
            // At most PLUGRL_MAX_DIMS (checked by `put`), so it fits.
            ndim: self.shape.len() as i32,
            shape: self.shape.as_ptr(),
        }
    }

    fn rows(&self) -> i64 {
        self.shape[0]
    }
}

impl<'a> Observation<'a> {
    /// An empty observation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or, if `name` exists, replaces) a state of `T` with `shape`
    /// (`[n, ...]`, at least one dimension). `data` holds the product of
    /// `shape` elements, row-major.
    ///
    /// Errors with [`Error::InvalidArgument`] if the shape does not fit the
    /// data, has no dimension or more than `PLUGRL_MAX_DIMS`, or `name`
    /// holds a NUL byte.
    pub fn state<T: Element>(
        &mut self,
        name: &str,
        data: &'a [T],
        shape: &[usize],
    ) -> Result<&mut Self, Error> {
        let entry = Entry::new("state", name, T::data(data), shape)?;
        put(&mut self.states, entry);
        Ok(self)
    }

    /// Adds (or replaces) an image: `u8`, `shape` `[n, height, width,
    /// channels]`.
    pub fn image(
        &mut self,
        name: &str,
        data: &'a [u8],
        shape: [usize; 4],
    ) -> Result<&mut Self, Error> {
        let entry = Entry::new("image", name, u8::data(data), &shape)?;
        put(&mut self.images, entry);
        Ok(self)
    }

    /// Sets the text, one string per env (copied). Errors if a string holds
    /// a NUL byte. Without text the library sends empty strings.
    pub fn text<S: AsRef<str>>(&mut self, text: &[S]) -> Result<&mut Self, Error> {
        let mut v = Vec::with_capacity(text.len());
        for (i, s) in text.iter().enumerate() {
            let c = CString::new(s.as_ref())
                .map_err(|_| Error::invalid(format!("observation text[{i}] holds a NUL byte")))?;
            v.push(c);
        }
        self.text = Some(v);
        Ok(self)
    }

    /// Removes the text: the library sends empty strings.
    pub fn clear_text(&mut self) -> &mut Self {
        self.text = None;
        self
    }

    /// Sends the text as a msgpack string array instead of numpy's `<U`
    /// form (the default, as the Python env client sends it).
    pub fn text_as_strings(&mut self, yes: bool) -> &mut Self {
        self.text_as_strings = yes;
        self
    }

    /// The number of images.
    pub fn num_images(&self) -> usize {
        self.images.len()
    }

    /// The number of states.
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    /// The number of rows (envs): the leading dimension of the first image,
    /// else of the first state, else the number of text strings. `None` for
    /// an empty observation.
    pub fn rows(&self) -> Option<usize> {
        match self.images.first().or(self.states.first()) {
            Some(e) => Some(e.rows() as usize),
            None => self.text.as_ref().map(Vec::len),
        }
    }

    /// Calls `f` with the C struct of this observation, which points into
    /// `self` and the borrowed arrays and so is valid during `f` only.
    ///
    /// The library reads text for as many rows as the first array has, so
    /// text of another length is refused here, before it could read past
    /// the pointer array.
    pub(crate) fn with_raw<R>(
        &self,
        f: impl FnOnce(&sys::plugrl_observation) -> R,
    ) -> Result<R, Error> {
        let images: Vec<sys::plugrl_array> = self
            .images
            .iter()
            .map(|e| e.raw(crate::Dtype::U8.to_raw()))
            .collect();
        let states: Vec<sys::plugrl_array> = self
            .states
            .iter()
            .map(|e| e.raw(e.data_dtype().to_raw()))
            .collect();
        let text: Option<Vec<*const c_char>> = match &self.text {
            None => None,
            Some(t) => {
                let first = self.images.first().or(self.states.first());
                match first {
                    None => {
                        return Err(Error::invalid(
                            "observation has text but no arrays, so its row count is unknown; add a state",
                        ))
                    }
                    Some(e) if e.rows() != t.len() as i64 => {
                        return Err(Error::invalid(format!(
                            "observation has {} text strings for {} rows (\"{}\" has shape {:?})",
                            t.len(),
                            e.rows(),
                            e.name.to_string_lossy(),
                            e.shape
                        )))
                    }
                    Some(_) => Some(t.iter().map(|s| s.as_ptr()).collect()),
                }
            }
        };
        let raw = sys::plugrl_observation {
            images: crate::element::ptr_or_null(&images),
            num_images: images.len(),
            states: crate::element::ptr_or_null(&states),
            num_states: states.len(),
            text: match &text {
                Some(t) => crate::element::ptr_or_null(t),
                None => std::ptr::null(),
            },
            text_as_strings: i32::from(self.text_as_strings),
        };
        Ok(f(&raw))
    }
}

impl<'a> Entry<'a> {
    fn new(what: &str, name: &str, data: Data<'a>, shape: &[usize]) -> Result<Entry<'a>, Error> {
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(format!("observation {what} name {name:?} holds a NUL byte"))
        })?;
        if shape.is_empty() || shape.len() > sys::PLUGRL_MAX_DIMS as usize {
            return Err(Error::invalid(format!(
                "observation {what} \"{name}\": shape {shape:?} has {} dimensions, want 1..{} \
                 (the leading one is the env count)",
                shape.len(),
                sys::PLUGRL_MAX_DIMS
            )));
        }
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if count != Some(data.len()) {
            return Err(Error::invalid(format!(
                "observation {what} \"{name}\": shape {shape:?} holds {} elements, its data has {}",
                count.map_or_else(|| "too many".to_string(), |c| c.to_string()),
                data.len()
            )));
        }
        // Every dimension is at most the element count, which a slice keeps
        // below isize::MAX, so each fits in an i64 (with one exception: a
        // zero-size array may have a huge dimension next to a zero).
        let mut dims = Vec::with_capacity(shape.len());
        for &d in shape {
            dims.push(i64::try_from(d).map_err(|_| {
                Error::invalid(format!(
                    "observation {what} \"{name}\": dimension {d} does not fit an int64"
                ))
            })?);
        }
        Ok(Entry {
            name: cname,
            data,
            shape: dims,
        })
    }

    fn data_dtype(&self) -> crate::Dtype {
        match self.data {
            Data::Bool(_) => crate::Dtype::Bool,
            Data::U8(_) => crate::Dtype::U8,
            Data::U16(_) => crate::Dtype::U16,
            Data::U32(_) => crate::Dtype::U32,
            Data::U64(_) => crate::Dtype::U64,
            Data::I8(_) => crate::Dtype::I8,
            Data::I16(_) => crate::Dtype::I16,
            Data::I32(_) => crate::Dtype::I32,
            Data::I64(_) => crate::Dtype::I64,
            Data::F16(_) => crate::Dtype::F16,
            Data::F32(_) => crate::Dtype::F32,
            Data::F64(_) => crate::Dtype::F64,
        }
    }
}

/// Replaces the entry of the same name, or appends.
fn put<'a>(group: &mut Vec<Entry<'a>>, entry: Entry<'a>) {
    match group.iter_mut().find(|e| e.name == entry.name) {
        Some(e) => *e = entry,
        None => group.push(entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_must_fit_the_data() {
        let d = [0.0f64; 6];
        let mut obs = Observation::new();
        assert!(obs.state("x", &d, &[3, 2]).is_ok());
        assert!(obs.state("x", &d, &[6]).is_ok());
        for bad in [&[3usize, 3][..], &[7], &[], &[usize::MAX, 2]] {
            let e = obs.state("x", &d, bad).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
        }
        assert!(obs.state("x\0y", &d, &[6]).is_err());
        assert!(obs.image("cam", &[0u8; 12], [1, 2, 2, 3]).is_ok());
        assert!(obs.image("cam", &[0u8; 11], [1, 2, 2, 3]).is_err());
        assert_eq!((obs.num_images(), obs.num_states()), (1, 1));
    }

    #[test]
    fn more_dimensions_than_the_library_takes_are_refused() {
        let d = [0.0f64; 1];
        let max = sys::PLUGRL_MAX_DIMS as usize;
        let mut obs = Observation::new();
        assert!(obs.state("x", &d, &vec![1; max]).is_ok());
        let e = obs.state("y", &d, &vec![1; max + 1]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(obs.num_states(), 1);
    }

    #[test]
    fn same_name_replaces() {
        let (a, b) = ([1.0f32; 2], [2i32; 4]);
        let mut obs = Observation::new();
        obs.state("s", &a, &[2, 1]).unwrap();
        obs.state("s", &b, &[2, 2]).unwrap();
        assert_eq!(obs.num_states(), 1);
        let (dtype, ndim) = obs
            .with_raw(|o| {
                // SAFETY: with_raw gives one valid state array during f.
                let s = unsafe { &*o.states };
                (s.dtype, s.ndim)
            })
            .unwrap();
        assert_eq!((dtype, ndim), (crate::Dtype::I32.to_raw(), 2));
    }

    #[test]
    fn text_must_have_one_string_per_row() {
        let t = [0.0f64; 3];
        let mut obs = Observation::new();
        obs.text(&["a", "b"]).unwrap();
        assert!(obs.with_raw(|_| ()).is_err(), "text without arrays");
        obs.state("t", &t, &[3, 1]).unwrap();
        assert!(obs.with_raw(|_| ()).is_err(), "2 strings for 3 rows");
        obs.text(&["a", "b", "c"]).unwrap();
        assert!(obs.with_raw(|_| ()).is_ok());
        assert!(obs.text(&["a\0"]).is_err());
        assert_eq!(obs.rows(), Some(3));
    }
}
