//! The compiler errors a newcomer meets, pinned: each names the fix. The
//! cases are in `ui/`, each with the error it must give beside it (regenerate
//! them with `TRYBUILD=overwrite` after a deliberate change of wording).

#[test]
fn mistakes_name_their_fix() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/ui/*.rs");
}
