"""Accuracy that is earned: FedAvg of a multinomial logistic regression on FedProx's Synthetic(alpha, beta).

The task (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020, and their
``generate_niid.py``): 60 features, 10 classes. Client ``k`` has

* ``u_k ~ N(0, alpha^2)``, ``W_k ~ N(u_k, 1)`` (60 x 10), ``b_k ~ N(u_k, 1)`` (10): its labelling
  model (the same ``u_k`` for both, as in the reference code; ``alpha`` is a standard deviation);
* ``B_k ~ N(0, beta^2)``, ``v_k ~ N(B_k, 1)`` (60): its feature mean;
* samples ``x ~ N(v_k, Sigma)`` with ``Sigma = diag(j^-1.2)``, ``j = 1..60``, and
  ``y = argmax softmax(W_k x + b_k)``;
* ``n_k`` samples, from the population (FedProx's ``lognormal(4, 2) + 50``).

``alpha`` controls how much the clients' labelling differs, ``beta`` how much their inputs do.

Data are never stored: client ``k``'s rows are generated on demand from the stream
``(STREAM_TASK, k, 1)``, which jumps straight to the rows asked for (:func:`_standard_rows`), so
a client's dataset is a fixed function of the seed and memory does not grow with the fleet. Its held-out rows come from
``(STREAM_TASK, k, 2)``; the pooled test set draws ``test_samples`` rows over clients in
proportion to their sizes, like FedProx's pooled per-client test splits.

Learner: multinomial logistic regression (weights ``(61, 10)``, the last row the bias), zero
initialisation, plain SGD on the mean cross-entropy of a mini-batch. Local training reads a
client's rows in order from its cursor, wrapping at ``n_k`` (FedProx shuffles once with a fixed
seed and then reads in order, too). FedAvg averages the local models weighted by ``n_k``.
Learning rate 0.01: FedProx's for its Synthetic data sets (Li et al., MLSys'20, Appendix C). The
sizes' heavy tail makes a few clients hold a large share of all data (and of the pooled test
set): a round that aggregates one of them moves the accuracy visibly, and which clients finish
matters.
"""
from __future__ import annotations

import numpy as np

from swansim.federated.population import STREAM_TASK, stream

N_FEATURES = 60
N_CLASSES = 10
LEARNING_RATE = 0.01
BATCH_SIZE = 16  # the Swan paper's batch size
FEATURE_SD = np.arange(1, N_FEATURES + 1, dtype=np.float64) ** -0.6  # sqrt(j^-1.2)
_MODEL, _TRAIN, _TEST = 0, 1, 2


class SyntheticTask:
    """FedProx's Synthetic(alpha, beta) over a fleet's clients (see the module docstring)."""

    def __init__(self, alpha: float, beta: float, seed: int):
        self.alpha, self.beta, self.seed = float(alpha), float(beta), int(seed)

    def client_model(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Client ``k``'s labelling model and feature mean: ``W (60, 10)``, ``b (10,)``, ``v (60,)``."""
        rng = stream(self.seed, STREAM_TASK, k, _MODEL)
        u = rng.normal(0.0, self.alpha)
        big_b = rng.normal(0.0, self.beta)
        w = rng.normal(u, 1.0, (N_FEATURES, N_CLASSES))
        b = rng.normal(u, 1.0, N_CLASSES)
        v = rng.normal(big_b, 1.0, N_FEATURES)
        return w, b, v

    @staticmethod
    def _label(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.argmax(x @ w + b, axis=-1)  # argmax of softmax = argmax of the logits

    def rows(self, k: int, n_k: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start, start+1, ...`` (``count`` of them, wrapping at ``n_k``) of client ``k``'s training data."""
        w, b, v = self.client_model(k)
        seed = np.random.SeedSequence(self.seed, spawn_key=(STREAM_TASK, k, _TRAIN))
        start %= n_k
        if start + count <= n_k:
            z = _standard_rows(seed, start, count)
        elif count < n_k:  # wraps once: the tail, then the head
            z = np.concatenate([_standard_rows(seed, start, n_k - start), _standard_rows(seed, 0, count - n_k + start)])
        else:  # reads the whole dataset, maybe several times
            z = _standard_rows(seed, 0, n_k)[(start + np.arange(count)) % n_k]
        x = z * FEATURE_SD + v
        return x, self._label(x, w, b)

    def held_out(self, k: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` held-out rows of client ``k`` (never used for training)."""
        w, b, v = self.client_model(k)
        x = _standard_rows(np.random.SeedSequence(self.seed, spawn_key=(STREAM_TASK, k, _TEST)), 0, count)
        x = x * FEATURE_SD + v
        return x, self._label(x, w, b)

    def test_set(self, n_samples: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """A pooled test set of ``size`` rows, clients drawn in proportion to their data sizes."""
        counts = stream(self.seed, STREAM_TASK).multinomial(size, n_samples / n_samples.sum())
        parts = [self.held_out(int(k), int(c)) for k, c in enumerate(counts) if c > 0]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _standard_rows(seed: np.random.SeedSequence, start: int, count: int) -> np.ndarray:
    """Rows ``start .. start+count-1`` of an endless table of N(0, I) rows, without drawing the ones before.

    Row ``j`` is the Box-Muller transform of the uniforms ``60 j .. 60 j + 59`` of the stream: a
    uniform double takes exactly one 64-bit draw, so the stream can jump straight to row ``j``.
    """
    bits = np.random.PCG64(seed)
    bits.advance(start * N_FEATURES)
    u = np.random.Generator(bits).random((count, N_FEATURES // 2, 2))
    # float32 transcendentals: 3x faster here, and data need no more than 7 digits
    radius = np.sqrt(np.float32(-2.0) * np.log((1.0 - u[..., 0]).astype(np.float32)))  # 1 - u in (0, 1]
    angle = np.float32(2.0 * np.pi) * u[..., 1].astype(np.float32)
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)], axis=-1).astype(np.float64)


def zero_model() -> np.ndarray:
    return np.zeros((N_FEATURES + 1, N_CLASSES))


def local_sgd(weights: np.ndarray, x: np.ndarray, y: np.ndarray, learning_rate: float = LEARNING_RATE) -> np.ndarray:
    """SGD from ``weights`` for several clients at once.

    ``x``: ``(clients, steps, batch, 60)``, ``y``: ``(clients, steps, batch)``; returns each client's
    local model, ``(clients, 61, 10)``. Every client's arithmetic is independent of the others'.
    """
    m, steps, batch, _ = x.shape
    w = np.repeat(weights[None, :N_FEATURES], m, axis=0)
    b = np.repeat(weights[None, N_FEATURES:], m, axis=0)
    clients, rows = np.arange(m)[:, None], np.arange(batch)[None, :]
    step = learning_rate / batch
    for s in range(steps):
        xs = x[:, s]
        logits = np.matmul(xs, w) + b
        logits -= logits.max(axis=-1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=-1, keepdims=True)
        p[clients, rows, y[:, s]] -= 1.0  # softmax minus one-hot: the cross-entropy gradient of the logits
        w -= step * np.matmul(xs.transpose(0, 2, 1), p)
        b -= step * p.sum(axis=1, keepdims=True)
    return np.concatenate([w, b], axis=1)


def fedavg(models: np.ndarray, n_samples: np.ndarray) -> np.ndarray:
    """The sample-weighted mean of local models ``(clients, 61, 10)`` (FedAvg, McMahan et al. 2017)."""
    weights = np.asarray(n_samples, dtype=np.float64)
    return np.tensordot(weights / weights.sum(), models, axes=1)


def accuracy(weights: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(x @ weights[:N_FEATURES] + weights[N_FEATURES], axis=-1) == y))


def local_models(task: SyntheticTask, weights: np.ndarray, clients: list[tuple[int, int, int]], steps: int,
                 batch: int = BATCH_SIZE, learning_rate: float = LEARNING_RATE) -> np.ndarray:
    """Local models of ``clients`` = ``[(k, n_k, cursor), ...]``: ``steps`` mini-batches each, from the cursor."""
    data = [task.rows(k, n_k, cursor, steps * batch) for k, n_k, cursor in clients]
    x = np.stack([d[0] for d in data]).reshape(len(clients), steps, batch, N_FEATURES)
    y = np.stack([d[1] for d in data]).reshape(len(clients), steps, batch)
    return local_sgd(weights, x, y, learning_rate)
