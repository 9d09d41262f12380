//! The stand-in `mongod` (see `tests/standins/README.md`).

fn main() {
    pitr_standins::mongod::main();
}
