#!/usr/bin/python3
"""Peer for autoencoder_bench: the same AutoEncoder trial in Debian's python3-torch, on the data
and settings that `build/bin/autoencoder_bench --export_dir=DIR` wrote.

    /usr/bin/python3 bench/torch_autoencoder_peer.py DIR

Same network (Linear layers, ReLU, a linear bottleneck, a mirrored decoder), the same PyTorch
default initialisation, AdamW, shuffled mini-batches, standardisation with the training split's
statistics, and R² over every feature in the data's own units. Peak memory is the trial's: the
high-water mark is reset before each run and read after it, as the C++ harness does.
"""
import os
import statistics
import sys
import time

import numpy as np
import torch


def settings(directory):
    values = {}
    with open(os.path.join(directory, "settings.txt")) as f:
        for line in f:
            key, value = line.strip().split("=")
            values[key] = float(value)
    return values


def reset_peak_rss():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def network(inputs, s):
    widths = []
    width = s["hidden_width"]
    for _ in range(int(s["hidden_layers"])):
        widths.append(max(int(s["bottleneck"]), int(round(width))))
        width *= s["width_decay"]
    layers, size = [], inputs
    for w in widths:
        layers += [torch.nn.Linear(size, w), torch.nn.ReLU()]
        size = w
    layers.append(torch.nn.Linear(size, int(s["bottleneck"])))
    size = int(s["bottleneck"])
    for w in reversed(widths):
        layers += [torch.nn.Linear(size, w), torch.nn.ReLU()]
        size = w
    layers.append(torch.nn.Linear(size, inputs))
    return torch.nn.Sequential(*layers)


def trial(train, validation, s, seed):
    torch.manual_seed(seed)
    mean = train.mean(0)
    scale = train.std(0, unbiased=False)
    scale = torch.where(scale > 1e-6, scale, torch.ones_like(scale))
    train_z = (train - mean) / scale
    validation_z = (validation - mean) / scale
    model = network(train.shape[1], s)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s["learning_rate"], weight_decay=0.0)
    rows, batch = train.shape[0], int(s["batch_size"])
    for _ in range(int(s["epochs"])):
        model.train()
        order = torch.randperm(rows)
        for start in range(0, rows, batch):
            inputs = train_z.index_select(0, order[start:start + batch])
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), inputs)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            torch.nn.functional.mse_loss(model(validation_z), validation_z).item()
    with torch.no_grad():
        reconstruction = model(validation_z) * scale + mean
        sse = (validation - reconstruction).pow(2).sum().item()
        sst = (validation - validation.mean(0)).pow(2).sum().item()
    return 1 - sse / sst


def main():
    directory = sys.argv[1]
    s = settings(directory)
    torch.set_num_threads(int(s["threads"]))
    load = lambda name: torch.from_numpy(
        np.loadtxt(os.path.join(directory, name), delimiter=",", skiprows=1, dtype=np.float32))
    train, validation = load("train.csv"), load("validation.csv")
    seconds, peaks, r2 = [], [], []
    for run in range(int(s["runs"])):
        reset_peak_rss()
        start = time.perf_counter()
        r2.append(trial(train, validation, s, run))
        seconds.append(time.perf_counter() - start)
        peaks.append(peak_rss_mib())
    print(f"python3-torch {torch.__version__}: {train.shape[0]} train rows x {train.shape[1]} channels, "
          f"{int(s['epochs'])} epochs, {int(s['threads'])} threads, {int(s['runs'])} runs")
    print(f"  trial time median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}), "
          f"peak RSS median {statistics.median(peaks):.0f} MiB, r2 median {statistics.median(r2):.4f}")


if __name__ == "__main__":
    main()
