//! The benchmark's error: anything, boxed.

use std::error::Error;

pub(crate) type BoxError = Box<dyn Error + Send + Sync>;
pub(crate) type Res<T> = Result<T, BoxError>;
