//! One generation of the device loop: every island evaluated (with its constants fitted, its
//! elite, statistics and per-size summary), the host's read of it (before a migration, when
//! there is one), every island bred, then the statistics and the observer, and between
//! generations the snapshot a checkpoint asks for. Each GPU's islands are queued by one thread
//! ([`on_every_gpu`]): with one GPU, the caller's.

use std::time::Instant;

use anyhow::{Result, anyhow};

use super::island::{breed_island, elite_and_sizes, evaluate, fit_constants};
use super::migrate::migrate_on_device;
use super::observe::{Seen, observe};
use super::profile::StageTimes;
use super::snapshot::outcome_rows;
use super::{DeviceLoop, DeviceTask, Island, Transfers, bytes};
use crate::backend::cuda::params::GenStats;
use crate::backend::cuda::MailboxRead;
use crate::evolve::{GenerationStats, Observer, islands};
use crate::program::tree::Population;

impl DeviceLoop<'_, '_, '_, '_> {
    /// Runs generation `self.gen`: evaluation, the host's read (and at a migration generation
    /// the migration), breeding (but after the last), the statistics and the observer, then
    /// the next generation's counts and a snapshot when asked. Returns the outcome's rows
    /// (every island's evaluated population and fitness) when the run ends with it: at the last
    /// generation, or when the observer finishes it; an
    /// [`Interrupted`](crate::evolve::Interrupted) error when it asks to stop.
    pub(super) fn generation(&mut self, observer: &mut dyn Observer) -> Result<Option<(Population, Vec<f64>)>> {
        let t0 = Instant::now();
        let e0 = self.tasks[0].engine();
        let (gen, p) = (self.gen, self.cfg.pop_size);
        // The host's books since the last generation's read (history, observer, snapshots).
        self.prof.mark(e0, "host between generations")?;
        self.evaluate()?;
        let last = gen == self.cfg.generations;
        let reads = self.read_and_breed(last, observer)?;
        self.books.tr.generations += 1;
        let seconds = t0.elapsed().as_secs_f64();
        // Control: every island's env steps go to the first task's counter (the one the run's
        // observer reads).
        if let DeviceTask::Control(c) = self.tasks[0] {
            if let Ok(mut played) = c.played.lock() {
                played.0 += self.isl.iter().zip(&reads).map(|(i, r)| r.env_steps + i.host_steps).sum::<u64>();
                played.1 += seconds;
            }
        }
        // With NSGA-II the generation's statistics are its survivors' (the host loop's too).
        let each: Vec<GenerationStats> = self
            .isl
            .iter()
            .zip(&reads)
            .map(|(i, r)| island_stats(gen, if i.survival.is_some() { &r.survivors } else { &r.stats }, p, seconds))
            .collect();
        let stats = islands::combine(gen, &each, p, seconds);
        // A generation that ends the run early: its evaluated rows for the outcome, the next
        // generation (bred above) for the snapshot.
        let ended = if !last && observer.finish(gen, &self.books.best) { Some(outcome_rows(&self.isl, observer.wants_population())?) } else { None };
        if self.isl.len() > 1 {
            observer.islands(&each);
            self.island_history.push(each);
        }
        observer.generation(&stats, &self.books.best);
        self.history.push(stats);
        if last {
            let rows = outcome_rows(&self.isl, observer.wants_population())?;
            self.prof.mark(e0, "final population read")?;
            return Ok(Some(rows));
        }
        for (i, r) in self.isl.iter_mut().zip(&reads) {
            i.take_counts(r, p)?;
            std::mem::swap(&mut i.pop, &mut i.next);
        }
        self.gen += 1;
        // Between generations: a snapshot when asked or before a stop, copied from the devices
        // only then.
        crate::evolve::snapshot_between_generations(observer, self.gen, ended.is_some(), |o| self.snapshot(o))?;
        Ok(ended)
    }

    /// Queues every island's evaluation, constant fitting (at a fitting generation) and elite,
    /// statistics and per-size summary, each GPU's islands step by step (all evaluations, then
    /// all fits, then all elites).
    fn evaluate(&mut self) -> Result<()> {
        let (cfg, gen, link, n_elite) = (self.cfg, self.gen, self.link, self.n_elite);
        let fitting = cfg.constants.at(gen);
        let fits = on_every_gpu(&mut self.isl, &mut self.prof, |group, prof| {
            let e = group[0].engine();
            let mut t = Transfers::default();
            for i in group.iter_mut() {
                evaluate(i, gen, link)?;
            }
            prof.mark(e, "evaluate")?;
            if fitting {
                for i in group.iter_mut() {
                    fit_constants(cfg, i, &mut t)?;
                }
                prof.mark(e, "constants")?;
            }
            for i in group.iter_mut() {
                elite_and_sizes(i, n_elite)?;
            }
            prof.mark(e, "elite and statistics")?;
            Ok(t)
        })?;
        for t in fits {
            self.books.tr.constant_fits += t.constant_fits;
            self.books.tr.constant_fit_bytes += t.constant_fit_bytes;
        }
        Ok(())
    }

    /// The host's read of the evaluated generation and the breeding of the next (but after the
    /// last). At a migration generation the host reads the generation first (migrants overwrite
    /// rows the hall of fame may want), the islands migrate and breed, and each mailbox is read
    /// again for the next population's counts; else the islands breed and one read takes both.
    /// Returns each island's read: the generation's statistics and env steps, the next
    /// population's counts.
    fn read_and_breed(&mut self, last: bool, observer: &mut dyn Observer) -> Result<Vec<MailboxRead>> {
        let (gen, rep, e0) = (self.gen, self.rep, self.tasks[0].engine());
        let mut seen: Option<Seen> = None;
        if self.islands.migrates_after(gen, self.cfg.generations) {
            seen = Some(observe(&self.isl, rep, gen, false, &mut self.books, observer)?);
            self.prof.mark(e0, "read mailbox, hall of fame and best")?;
            migrate_on_device(&mut self.isl, self.islands.migrants, self.n_elite, self.link, &mut self.books.tr)?;
            for i in &self.isl {
                self.prof.mark(i.engine(), "migration")?;
            }
        }
        if !last {
            self.breed()?;
        }
        let reads = match seen {
            Some(seen) if !last => {
                // The next populations' counts, queued after the first read.
                let mut reads = seen.reads;
                for (i, r) in self.isl.iter().zip(reads.iter_mut()) {
                    let again = i.engine().read_mailbox(&i.mail)?;
                    self.books.tr.mailbox_reads += 1;
                    self.books.tr.mailbox_bytes += bytes::MAILBOX;
                    *r = MailboxRead { stats: r.stats, survivors: r.survivors, env_steps: r.env_steps, ..again };
                }
                reads
            }
            Some(seen) => seen.reads,
            None => observe(&self.isl, rep, gen, !last, &mut self.books, observer)?.reads,
        };
        self.prof.mark(e0, "read mailbox, hall of fame and best")?;
        Ok(reads)
    }

    /// Queues every island's next population (generation `self.gen + 1`).
    fn breed(&mut self) -> Result<()> {
        let (rep, p, n_elite) = (self.rep, self.cfg.pop_size, self.n_elite);
        let (next_gen, cfg) = (self.gen as u32 + 1, self.cfg);
        on_every_gpu(&mut self.isl, &mut self.prof, |group, prof| {
            for i in group.iter_mut() {
                breed_island(i, rep, p, n_elite, cfg, next_gen, prof)?;
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// One island's statistics of generation `gen` from its mailbox's statistics `s` (`p` rows; the
/// best is `+inf` and the means NaN when no row is valid).
fn island_stats(gen: usize, s: &GenStats, p: usize, seconds: f64) -> GenerationStats {
    let nv = s.n_valid as usize;
    GenerationStats {
        generation: gen,
        best: if s.best.is_finite() && nv > 0 { s.best } else { f64::INFINITY },
        mean: if nv > 0 { s.sum / nv as f64 } else { f64::NAN },
        mean_size: if nv > 0 { s.sum_len / nv as f64 } else { f64::NAN },
        invalid: p - nv,
        seconds,
    }
}

/// Runs `f` on the islands of each GPU (contiguous: [`islands::device_of`]) in island order,
/// each GPU's on a scoped thread of its own when there are several: a step that waits for its
/// GPU (a constant fit reads the fitness back) or queues many launches then keeps every GPU
/// busy (measured on four H100s: one thread fitting island after island took 3.2x one GPU's
/// whole run per generation). With one GPU, or while profiling (which waits after every step),
/// the groups run on this thread with `prof`; each thread gets a profile that is off. Returns
/// each group's result in order.
fn on_every_gpu<'t, 'r, 'g, T: Send>(
    isl: &mut [Island<'t, 'r, 'g>],
    prof: &mut StageTimes,
    f: impl Fn(&mut [Island<'t, 'r, 'g>], &mut StageTimes) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let mut groups: Vec<&mut [Island<'t, 'r, 'g>]> = Vec::new();
    let mut rest = isl;
    while !rest.is_empty() {
        let e = rest[0].engine();
        let n = rest.iter().take_while(|i| std::ptr::eq(i.engine(), e)).count();
        let (group, tail) = rest.split_at_mut(n);
        groups.push(group);
        rest = tail;
    }
    if groups.len() == 1 || prof.on() {
        return groups.into_iter().map(|g| f(g, prof)).collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = groups.into_iter().map(|g| s.spawn(move || f(g, &mut StageTimes::new(false)))).collect();
        handles.into_iter().map(|h| h.join().map_err(|_| anyhow!("a GPU's thread panicked"))?).collect()
    })
}
