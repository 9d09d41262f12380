//! PLACEHOLDER: stand-ins (helper-owned).
