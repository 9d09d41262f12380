//! The stand-in `mongorestore` (see `tests/standins/README.md`).

fn main() {
    pitr_standins::tools::mongorestore::main();
}
