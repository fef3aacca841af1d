/// Generates `get_ref`, `get_mut` and `into_inner` for a wrapper service whose
/// inner service lives in a field called `inner`.
macro_rules! define_inner_service_accessors {
    () => {
        /// Returns a reference to the inner service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// Returns a mutable reference to the inner service.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Consumes `self`, returning the inner service.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}
