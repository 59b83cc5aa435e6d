"""What an archived run (`softswitch-exp archive`) or a results directory
keeps of each combination, for the scripts that read runs repeat by
repeat (guard-attempts.py, hop-marks.py, pred-qla.py)."""
import gzip
import json
import os


def combos_of(path):
    """An archive's combos.json.gz, or a results directory's combination
    directories (each with its result.json and switch.json), as
    {name: {"result": …, "switch": …}}."""
    archived = os.path.join(path, "combos.json.gz")
    if os.path.exists(archived):
        with gzip.open(archived) as f:
            return json.load(f)
    combos = {}
    for name in os.listdir(path):
        result = os.path.join(path, name, "result.json")
        if not os.path.exists(result):
            continue  # base_rtt, logs, or a combination still running
        try:
            with open(result) as f:
                c = {"result": json.load(f)}
            switch = os.path.join(path, name, "switch.json")
            if os.path.exists(switch):
                with open(switch) as f:
                    c["switch"] = json.load(f)
        except json.JSONDecodeError:
            continue  # a combination still being written
        combos[name] = c
    return combos
