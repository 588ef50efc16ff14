//! Export (in progress).
