"""The disk probe's write cost per element, against a write twenty times its size timed apart in
the same process (tests/run, phase 2: CPU per element is what is compared, and a neighbour's
cache traffic moves it). What the fill's prediction charges for writing the tier
(planning/predict.py, ``filling``): left out, the image row's first epoch was predicted 2x fast."""

import time

import numpy as np
import tensorflow as tf

from plumbkit.tfdata.disk_probe import probe_directory
from plumbkit.tfdata.disk_tier import write_tier

ELEMENT = 27_648  # the image row's resized 96x96x3 uint8 images


def written_cpu_per_element(path, elements: int) -> float:
    """Process CPU per element of writing ``elements`` incompressible ones in the tier's form."""
    data = np.random.default_rng(1).integers(0, 256, size=(elements, ELEMENT), dtype=np.uint8)
    ds = tf.data.Dataset.from_tensor_slices(data)
    began = time.process_time()
    write_tier(ds, path)
    return (time.process_time() - began) / elements


def test_the_probe_measures_what_writing_a_tier_costs_per_element(tmp_path):
    probed = probe_directory(tmp_path / "cache", ELEMENT, fresh=True)
    write_tier(tf.data.Dataset.from_tensor_slices(np.zeros([2, ELEMENT], np.uint8)), tmp_path / "warm")
    truth = written_cpu_per_element(tmp_path / "large", 6000)  # 166 MB
    # 27 KB elements: 109-124 us each on the dev VM, probe and truth alike
    # (a probe that measured nothing reads 0, and fails)
    assert 0.5 * truth < probed.write_cpu_per_element < 2.0 * truth, (probed.write_cpu_per_element, truth)
