//! An observer that stops a run after a given generation, keeping the snapshot taken before the
//! stop (resume tests of the device loop include it).

/// Stops a run after generation `.0 - 1` (`.1` counts the generations seen), keeping its last
/// snapshot (`.2`).
pub struct StopAt(pub usize, pub usize, pub Option<grove::evolve::checkpoint::Saved>);

impl grove::evolve::Observer for StopAt {
    fn generation(&mut self, s: &grove::evolve::GenerationStats, _: &grove::evolve::Best) {
        self.1 = s.generation + 1;
    }
    fn snapshot(&mut self, state: &grove::evolve::Snapshot<'_>) -> anyhow::Result<()> {
        self.2 = Some(grove::evolve::checkpoint::Saved::of(state));
        Ok(())
    }
    fn stop_requested(&self) -> bool {
        self.1 == self.0
    }
}
