//! The probe env of SPEC 8.1, batched: what `plugrl-conformance --probe`
//! reads back to check what a client did with each action chunk.
//!
//! Env `i`'s episode lasts `L_i = 3 + 2 * (i mod 3)` steps. Its observation
//! has two states: `t` (f64 `[n, 1]`, steps taken in the current episode,
//! 0 after a reset) and `a` (f64 `[n, d]`, the action applied last). A step
//! applies the action, adds 1 to `t`, stores the action in `a` and pays 1;
//! the env terminates when `t` reaches `L_i` and never truncates.

use plugrl::{Error, Observation};

/// `n` probe envs with actions of width `d`.
#[derive(Debug, Clone)]
pub struct ProbeEnvs {
    n: usize,
    d: usize,
    t: Vec<f64>,
    a: Vec<f64>,
    text: Vec<String>,
}

impl ProbeEnvs {
    /// `n` envs at t = 0, with action width `d` (SPEC 8.1 allows d = 1
    /// before the client knows the width).
    pub fn new(n: usize, d: usize) -> ProbeEnvs {
        ProbeEnvs {
            n,
            d,
            t: vec![0.0; n],
            a: vec![0.0; n * d],
            text: (0..n).map(|i| format!("probe env {i}")).collect(),
        }
    }

    /// The number of envs.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are no envs.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The action width.
    pub fn width(&self) -> usize {
        self.d
    }

    /// Changes the action width (learnt from the first action when metadata
    /// had no action_dim); `a` starts over at zeros.
    pub fn set_width(&mut self, d: usize) {
        self.d = d;
        self.a = vec![0.0; self.n * d];
    }

    /// `L_i`, env `i`'s episode length.
    pub fn episode_length(i: usize) -> f64 {
        (3 + 2 * (i % 3)) as f64
    }

    /// Steps taken in env `i`'s current episode.
    pub fn t(&self, i: usize) -> f64 {
        self.t[i]
    }

    /// The observation of every env now: states `t` and `a`, and text (sent
    /// in numpy's `<U` form, as the Python env client sends it).
    pub fn observation(&self) -> Result<Observation<'_>, Error> {
        let mut obs = Observation::new();
        obs.state("t", &self.t, &[self.n, 1])?
            .state("a", &self.a, &[self.n, self.d])?
            .text(&self.text)?;
        Ok(obs)
    }

    /// Steps every env with its action (`actions` holds `n * d` values, env
    /// `i`'s at `i * d`) and sets `terminated`.
    pub fn step(&mut self, actions: &[f64], terminated: &mut [bool]) {
        let d = self.d;
        for i in 0..self.n {
            self.t[i] += 1.0;
            self.a[i * d..(i + 1) * d].copy_from_slice(&actions[i * d..(i + 1) * d]);
            terminated[i] = self.t[i] == Self::episode_length(i);
        }
    }

    /// Resets the envs that terminated.
    pub fn reset_ended(&mut self, terminated: &[bool]) {
        for (t, &done) in self.t.iter_mut().zip(terminated) {
            if done {
                *t = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episodes_last_3_5_7_steps() {
        let mut p = ProbeEnvs::new(4, 2);
        let mut done = vec![false; 4];
        let mut ended_at = vec![Vec::new(); 4];
        for step in 1..=15 {
            let actions: Vec<f64> = (0..8).map(|k| (step * 100 + k) as f64).collect();
            p.step(&actions, &mut done);
            for i in 0..4 {
                if done[i] {
                    ended_at[i].push(step);
                }
            }
            p.reset_ended(&done);
        }
        assert_eq!(ended_at[0], vec![3, 6, 9, 12, 15]);
        assert_eq!(ended_at[1], vec![5, 10, 15]);
        assert_eq!(ended_at[2], vec![7, 14]);
        assert_eq!(ended_at[3], vec![3, 6, 9, 12, 15]);
        // a holds the last action applied.
        assert_eq!(p.a[2..4], [1502.0, 1503.0]);
    }

    #[test]
    fn observation_has_t_and_a() {
        let p = ProbeEnvs::new(3, 2);
        let obs = p.observation().unwrap();
        assert_eq!((obs.num_states(), obs.rows()), (2, Some(3)));
    }
}
