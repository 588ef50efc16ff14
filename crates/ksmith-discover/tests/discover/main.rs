//! The integration tests of ksmith-discover, in one test binary, all against the loopback fake
//! of GitHub's API on a virtual clock (no test reaches the network or waits for real).

mod support;

// Paging past the 1,000-result cap by slicing, and what cannot be sliced further.
mod slicing;

// Rate limits, server errors, dropped connections, malformed and incomplete pages.
mod faults;

// Reruns: new, refreshed, renamed, pushed-to and vanished repositories; resuming.
mod incremental;

// Code search for `nn.Module`, and where the token goes.
mod code_and_token;
