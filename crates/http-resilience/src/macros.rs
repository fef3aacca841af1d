/// Generates `get_ref`, `get_mut` and `into_inner` for a wrapper whose inner
/// value lives in a field called `inner` of type `$inner`.
///
/// `define_inner_service_accessors!()` is the form for services (`S`);
/// `define_inner_service_accessors!(B, "body")` the one for bodies.
macro_rules! define_inner_service_accessors {
    () => {
        define_inner_service_accessors!(S, "service");
    };
    ($inner:ident, $what:literal) => {
        #[doc = concat!("Returns a reference to the inner ", $what, ".")]
        pub fn get_ref(&self) -> &$inner {
            &self.inner
        }

        #[doc = concat!("Returns a mutable reference to the inner ", $what, ".")]
        pub fn get_mut(&mut self) -> &mut $inner {
            &mut self.inner
        }

        #[doc = concat!("Consumes `self`, returning the inner ", $what, ".")]
        pub fn into_inner(self) -> $inner {
            self.inner
        }
    };
}
