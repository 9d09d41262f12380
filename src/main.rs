fn main() -> std::process::ExitCode {
    pitr::cli::main()
}
