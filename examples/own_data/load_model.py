# Reads the delivered model with numpy alone and prints its test accuracy (README, "Your data, your
# pretrained weights, a verified model back"). Run from the directory holding out/ and mine/.
import json, numpy as np
b = open("out/model.safetensors", "rb").read(); n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n])
W = {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32).reshape(v["shape"]) for k, v in h.items() if k != "__metadata__"}
x, y = np.load("mine/test-features.npy"), np.load("mine/test-labels.npy")
print("test accuracy", ((np.maximum(x @ W["0.weight"].T + W["0.bias"], 0) @ W["2.weight"].T + W["2.bias"]).argmax(1) == y).mean())
