//! PLACEHOLDER: ObjectId decoding (helper-owned).
