//! Link behaviour tests.
