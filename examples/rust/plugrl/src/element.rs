//! Element types: [`Dtype`] and the traits that tie Rust types to it.

use std::fmt;
use std::os::raw::c_void;

use plugrl_sys as sys;

/// An element type of `plugrl_dtype`, with its numpy typestr (SPEC 3.3) in
/// host byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dtype {
    /// `|b1`: one byte holding 0 or 1 ([`bool`]).
    Bool,
    /// `|u1` ([`u8`]; images are always this).
    U8,
    /// `<u2` ([`u16`]).
    U16,
    /// `<u4` ([`u32`]).
    U32,
    /// `<u8` ([`u64`]).
    U64,
    /// `|i1` ([`i8`]).
    I8,
    /// `<i2` ([`i16`]).
    I16,
    /// `<i4` ([`i32`]).
    I32,
    /// `<i8` ([`i64`]).
    I64,
    /// `<f2`: IEEE half precision ([`F16`], its bits).
    F16,
    /// `<f4` ([`f32`]).
    F32,
    /// `<f8` ([`f64`], the convention for states).
    F64,
}

impl Dtype {
    /// The C value.
    pub fn to_raw(self) -> sys::plugrl_dtype {
        type D = sys::plugrl_dtype;
        match self {
            Dtype::Bool => D::PLUGRL_DTYPE_BOOL,
            Dtype::U8 => D::PLUGRL_DTYPE_U8,
            Dtype::U16 => D::PLUGRL_DTYPE_U16,
            Dtype::U32 => D::PLUGRL_DTYPE_U32,
            Dtype::U64 => D::PLUGRL_DTYPE_U64,
            Dtype::I8 => D::PLUGRL_DTYPE_I8,
            Dtype::I16 => D::PLUGRL_DTYPE_I16,
            Dtype::I32 => D::PLUGRL_DTYPE_I32,
            Dtype::I64 => D::PLUGRL_DTYPE_I64,
            Dtype::F16 => D::PLUGRL_DTYPE_F16,
            Dtype::F32 => D::PLUGRL_DTYPE_F32,
            Dtype::F64 => D::PLUGRL_DTYPE_F64,
        }
    }

    /// The dtype of a C value; `None` for a value this crate does not know
    /// (from a newer library).
    pub fn from_raw(raw: sys::plugrl_dtype) -> Option<Dtype> {
        type D = sys::plugrl_dtype;
        Some(match raw {
            D::PLUGRL_DTYPE_BOOL => Dtype::Bool,
            D::PLUGRL_DTYPE_U8 => Dtype::U8,
            D::PLUGRL_DTYPE_U16 => Dtype::U16,
            D::PLUGRL_DTYPE_U32 => Dtype::U32,
            D::PLUGRL_DTYPE_U64 => Dtype::U64,
            D::PLUGRL_DTYPE_I8 => Dtype::I8,
            D::PLUGRL_DTYPE_I16 => Dtype::I16,
            D::PLUGRL_DTYPE_I32 => Dtype::I32,
            D::PLUGRL_DTYPE_I64 => Dtype::I64,
            D::PLUGRL_DTYPE_F16 => Dtype::F16,
            D::PLUGRL_DTYPE_F32 => Dtype::F32,
            D::PLUGRL_DTYPE_F64 => Dtype::F64,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::Bool | Dtype::U8 | Dtype::I8 => 1,
            Dtype::U16 | Dtype::I16 | Dtype::F16 => 2,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 | Dtype::F64 => 8,
        }
    }

    /// The numpy typestr in little-endian form, e.g. `"<f8"`.
    pub fn typestr(self) -> &'static str {
        match self {
            Dtype::Bool => "|b1",
            Dtype::U8 => "|u1",
            Dtype::U16 => "<u2",
            Dtype::U32 => "<u4",
            Dtype::U64 => "<u8",
            Dtype::I8 => "|i1",
            Dtype::I16 => "<i2",
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
            Dtype::F16 => "<f2",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.typestr())
    }
}

/// An IEEE half-precision float, as its bits (`PLUGRL_DTYPE_F16`). Rust
/// has no stable `f16`; convert with your own code or let the library do
/// it (e.g. [`ActionView::copy_to`](crate::ActionView::copy_to) into `f32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct F16(pub u16);

/// A typed slice, so that an observation keeps its data borrowed with the
/// right type without any pointer of its own. (`pub` in a private module:
/// nameable by the sealed trait, not by users.)
#[derive(Debug, Clone, Copy)]
pub enum Data<'a> {
    Bool(&'a [bool]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F16(&'a [F16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl Data<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Data::Bool(s) => s.len(),
            Data::U8(s) => s.len(),
            Data::U16(s) => s.len(),
            Data::U32(s) => s.len(),
            Data::U64(s) => s.len(),
            Data::I8(s) => s.len(),
            Data::I16(s) => s.len(),
            Data::I32(s) => s.len(),
            Data::I64(s) => s.len(),
            Data::F16(s) => s.len(),
            Data::F32(s) => s.len(),
            Data::F64(s) => s.len(),
        }
    }

    /// The data for C: NULL for an empty slice (see [`ptr_or_null`]).
    pub(crate) fn as_ptr(&self) -> *const c_void {
        match self {
            Data::Bool(s) => ptr_or_null(s).cast(),
            Data::U8(s) => ptr_or_null(s).cast(),
            Data::U16(s) => ptr_or_null(s).cast(),
            Data::U32(s) => ptr_or_null(s).cast(),
            Data::U64(s) => ptr_or_null(s).cast(),
            Data::I8(s) => ptr_or_null(s).cast(),
            Data::I16(s) => ptr_or_null(s).cast(),
            Data::I32(s) => ptr_or_null(s).cast(),
            Data::I64(s) => ptr_or_null(s).cast(),
            Data::F16(s) => ptr_or_null(s).cast(),
            Data::F32(s) => ptr_or_null(s).cast(),
            Data::F64(s) => ptr_or_null(s).cast(),
        }
    }
}

/// A slice's pointer for C, or NULL when it is empty. An empty Rust slice
/// points to a dangling address such as 0x8; the library is Go code, and
/// Go's runtime aborts the process when it finds an address below 4096 in
/// a pointer slot of a stack it moves. NULL is what the library expects
/// with a count of 0.
pub(crate) fn ptr_or_null<T>(s: &[T]) -> *const T {
    if s.is_empty() {
        std::ptr::null()
    } else {
        s.as_ptr()
    }
}

/// [`ptr_or_null`] for a buffer the library writes.
pub(crate) fn mut_ptr_or_null<T>(s: &mut [T]) -> *mut T {
    if s.is_empty() {
        std::ptr::null_mut()
    } else {
        s.as_mut_ptr()
    }
}

pub(crate) mod sealed {
    /// Implemented only here, so users cannot give a type a wrong dtype.
    pub trait Sealed: Sized {
        /// The slice with its type, for an observation.
        fn data(s: &[Self]) -> super::Data<'_>;
    }
}

/// A Rust type that has a [`Dtype`]: what an observation's arrays may hold.
///
/// Implemented for `bool`, `u8`, `u16`, `u32`, `u64`, `i8`, `i16`, `i32`,
/// `i64`, [`F16`], `f32` and `f64`, and sealed: the library reads and writes
/// memory by the dtype, so only types whose layout is exactly that dtype's
/// may implement it.
pub trait Element: Copy + Default + sealed::Sealed + 'static {
    /// The dtype of this type.
    const DTYPE: Dtype;
}

/// An [`Element`] that the library may write: every bit pattern of its size
/// is a valid value. All elements but `bool` (a byte other than 0 or 1 is
/// not a `bool`, and a server may send one), so actions are read into
/// these; read a boolean action as `u8`.
pub trait Numeric: Element {}

macro_rules! element {
    ($t:ty, $dtype:ident, $variant:ident, numeric) => {
        element!($t, $dtype, $variant);
        impl Numeric for $t {}
    };
    ($t:ty, $dtype:ident, $variant:ident) => {
        impl sealed::Sealed for $t {
            fn data(s: &[Self]) -> Data<'_> {
                Data::$variant(s)
            }
        }
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$dtype;
        }
    };
}

element!(bool, Bool, Bool);
element!(u8, U8, U8, numeric);
element!(u16, U16, U16, numeric);
element!(u32, U32, U32, numeric);
element!(u64, U64, U64, numeric);
element!(i8, I8, I8, numeric);
element!(i16, I16, I16, numeric);
element!(i32, I32, I32, numeric);
element!(i64, I64, I64, numeric);
element!(F16, F16, F16, numeric);
element!(f32, F32, F32, numeric);
element!(f64, F64, F64, numeric);

#[cfg(test)]
mod tests {
    use super::sealed::Sealed;
    use super::*;

    fn check<T: Element>() {
        assert_eq!(T::DTYPE.size(), std::mem::size_of::<T>(), "{}", T::DTYPE);
        assert_eq!(Dtype::from_raw(T::DTYPE.to_raw()), Some(T::DTYPE));
        // SAFETY: plugrl_dtype_size takes any value and returns a number.
        let c_size = unsafe { sys::plugrl_dtype_size(T::DTYPE.to_raw()) };
        assert_eq!(c_size, std::mem::size_of::<T>(), "{}", T::DTYPE);
    }

    #[test]
    fn sizes_match_the_library() {
        check::<bool>();
        check::<u8>();
        check::<u16>();
        check::<u32>();
        check::<u64>();
        check::<i8>();
        check::<i16>();
        check::<i32>();
        check::<i64>();
        check::<F16>();
        check::<f32>();
        check::<f64>();
        assert_eq!(Dtype::from_raw(sys::plugrl_dtype(0)), None);
        assert_eq!(Dtype::from_raw(sys::plugrl_dtype(13)), None);
    }

    #[test]
    fn empty_slices_are_null_for_c() {
        let empty: [f64; 0] = [];
        assert!(f64::data(&empty).as_ptr().is_null());
        assert!(!f64::data(&[1.0]).as_ptr().is_null());
    }
}
