//! The stand-in `mongodump` (see `tests/standins/README.md`).

fn main() {
    pitr_standins::tools::mongodump::main();
}
