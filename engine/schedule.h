// The learning rate of each step: constant, or linear warmup then cosine decay (Loshchilov & Hutter,
// "SGDR: Stochastic Gradient Descent with Warm Restarts", ICLR 2017, without restarts; the warmup +
// cosine form of Karpathy's nanoGPT train.py). The rate is an attribute of the optimizer nodes, so
// every party (the referee rebuilding a step graph included) must compute it bit for bit alike: it is
// computed in IEEE binary64 with a fixed sequence of +, −, ×, ÷ (no libm) and rounded to binary32 once.
#pragma once

#include <cstdint>

namespace tribunal {

struct JobSpec;

/// cos(π·x) for x ∈ [0, 1], in binary64: reflection x → 1 − x onto [0, 1/2] (exact by Sterbenz),
/// then cos(π·y) for y ≤ 1/4 or sin(π·(1/2 − y)) otherwise (1/2 − y exact), each a Taylor polynomial
/// in r = π·y (|r| ≤ π/4) evaluated in Horner form with separate multiplies and adds (never fma),
/// through the r¹⁸ (cos) and r¹⁹ (sin) terms: truncation error < 1e-17, so the result is within a
/// few ulp of the true value. Deterministic on every IEEE-754 machine with binary64 arithmetic
/// (x86-64 SSE2, AArch64; the build forbids contraction). x outside [0, 1] is clamped.
double portable_cospi(double x);

/// The learning rate of step t (0-based: the step being taken, state t → t+1), as a float32:
///  - schedule "constant": optimizer.lr exactly;
///  - schedule "cosine": for t < W = warmup_steps, lr·(t+1)/W; otherwise, with
///    progress = (t − W)/(T − W) (T = job.steps, so progress ∈ [0, 1) for the job's steps),
///    min_lr + ½·(lr − min_lr)·(1 + cos(π·progress)).
/// All in binary64 from the float32 hyperparameters, rounded to float32 at the end. t ≥ T (a cheater
/// claiming extra steps) continues with progress ≥ 1, clamped to min_lr.
float learning_rate(const JobSpec& job, int64_t t);

}  // namespace tribunal
