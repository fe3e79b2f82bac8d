//! The classic-control cartpole (Barto, Sutton and Anderson 1983, with the
//! constants and Euler integration of gym's CartPole-v1), batched, with a
//! continuous action: a cart on a frictionless track with a pole hinged on
//! it, pushed with a force of `10 N * clamp(u, -1, 1)`.
//!
//! Observation: state `x`, f64 `[n, 4]`: cart position (m), cart velocity
//! (m/s), pole angle (rad, 0 upright) and pole angular velocity (rad/s).
//! Reward 1 for every step, the last included (as in CartPole-v1). An
//! episode terminates when the pole tilts past 12 degrees or the cart
//! leaves `[-2.4, 2.4]` m, and is truncated (a success) after `max_steps`.
//! A reset draws every coordinate uniformly from `[-0.05, 0.05]`, from one
//! seeded generator shared by all envs, so a run repeats exactly.

use plugrl::{Error, Observation};

const GRAVITY: f64 = 9.8;
const MASS_CART: f64 = 1.0;
const MASS_POLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASS_CART + MASS_POLE;
const HALF_LENGTH: f64 = 0.5; // m: half the pole's length
const POLE_MASS_LENGTH: f64 = MASS_POLE * HALF_LENGTH;
const FORCE_MAG: f64 = 10.0; // N, at |u| = 1
const TAU: f64 = 0.02; // s per step
const MAX_ANGLE: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const MAX_X: f64 = 2.4;
const RESET_NOISE: f64 = 0.05;

/// splitmix64: a small seeded generator whose sequence is the same on
/// every platform (the C++ demo uses the same one).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// What one step of one env did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepResult {
    /// The reward (1).
    pub reward: f64,
    /// The pole fell or the cart left the track.
    pub terminated: bool,
    /// The episode reached `max_steps` without terminating.
    pub truncated: bool,
}

/// `n` cartpoles and the observation batch they fill.
#[derive(Debug, Clone)]
pub struct Cartpoles {
    n: usize,
    max_steps: u64,
    state: Vec<f64>, // [n, 4]
    steps: Vec<u64>,
    rng: Rng,
}

impl Cartpoles {
    /// `n` cartpoles, reset, with episodes of at most `max_steps` steps.
    pub fn new(n: usize, max_steps: u64, seed: u64) -> Cartpoles {
        let mut c = Cartpoles {
            n,
            max_steps,
            state: vec![0.0; n * 4],
            steps: vec![0; n],
            rng: Rng::new(seed),
        };
        for i in 0..n {
            c.reset(i);
        }
        c
    }

    /// The number of envs.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are no envs.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Values of one env's action.
    pub const ACTION_WIDTH: usize = 1;

    /// Env `i`'s state `[x, x_dot, theta, theta_dot]`.
    pub fn state(&self, i: usize) -> &[f64] {
        &self.state[i * 4..i * 4 + 4]
    }

    /// Steps taken in env `i`'s episode.
    pub fn steps(&self, i: usize) -> u64 {
        self.steps[i]
    }

    /// The observation of every env: state `x`, `[n, 4]`.
    pub fn observation(&self) -> Result<Observation<'_>, Error> {
        let mut obs = Observation::new();
        obs.state("x", &self.state, &[self.n, 4])?;
        Ok(obs)
    }

    /// Puts env `i` back near upright and still.
    pub fn reset(&mut self, i: usize) {
        for k in 0..4 {
            self.state[i * 4 + k] = self.rng.uniform(-RESET_NOISE, RESET_NOISE);
        }
        self.steps[i] = 0;
    }

    /// Steps env `i` with action `u` (clamped to [-1, 1]; NaN pushes 0).
    pub fn step(&mut self, i: usize, u: f64) -> StepResult {
        let u = if u.is_nan() { 0.0 } else { u.clamp(-1.0, 1.0) };
        let force = FORCE_MAG * u;
        let s = &mut self.state[i * 4..i * 4 + 4];
        let (x, x_dot, theta, theta_dot) = (s[0], s[1], s[2], s[3]);
        let (sin, cos) = theta.sin_cos();
        let temp = (force + POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS;
        let theta_acc = (GRAVITY * sin - cos * temp)
            / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS;
        s[0] = x + TAU * x_dot;
        s[1] = x_dot + TAU * x_acc;
        s[2] = theta + TAU * theta_dot;
        s[3] = theta_dot + TAU * theta_acc;
        self.steps[i] += 1;
        let terminated = !(s[0].abs() <= MAX_X && s[2].abs() <= MAX_ANGLE);
        StepResult {
            reward: 1.0,
            terminated,
            truncated: !terminated && self.steps[i] >= self.max_steps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: impl Fn(&[f64]) -> f64, seed: u64) -> u64 {
        let mut c = Cartpoles::new(1, 500, seed);
        loop {
            let u = policy(c.state(0));
            let r = c.step(0, u);
            if r.terminated || r.truncated {
                return c.steps(0);
            }
        }
    }

    #[test]
    fn the_pole_falls_without_control_and_stays_up_with_it() {
        let idle = run(|_| 0.0, 7);
        assert!((5..100).contains(&idle), "idle lasted {idle} steps");
        // A hand-tuned linear controller balances for the whole episode.
        let pd = run(|s| 0.5 * s[0] + 1.0 * s[1] + 20.0 * s[2] + 3.0 * s[3], 7);
        assert_eq!(pd, 500);
    }

    #[test]
    fn runs_repeat_for_a_seed() {
        let a = Cartpoles::new(3, 500, 42);
        let b = Cartpoles::new(3, 500, 42);
        let c = Cartpoles::new(3, 500, 43);
        assert_eq!(a.state, b.state);
        assert_ne!(a.state, c.state);
        assert!(a.state.iter().all(|v| v.abs() <= RESET_NOISE));
    }

    #[test]
    fn uniform_stays_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let v = r.uniform(-1.0, 1.0);
            assert!((-1.0..1.0).contains(&v));
        }
    }
}
