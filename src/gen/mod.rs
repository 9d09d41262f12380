//! PLACEHOLDER: fixture generator (helper-owned).
