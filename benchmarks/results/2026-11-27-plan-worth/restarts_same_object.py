import tempfile, statistics
from plumbkit.bench import pipelines as bp
from plumbkit.tfdata.runtime_costs import _epoch_stamps, _one_pass
make = bp.expert_tuned(tempfile.mkdtemp())
def rates(ds):
    st = _epoch_stamps(ds.repeat(), 128, 21, 60, 5)
    d = [st[e+1][0]-st[e][0] for e in range(1, 20)]
    return 128*len(d)/sum(d)
for trial in range(3):
    ds = make(); _one_pass(ds, 10); a = rates(ds)
    ds = make(); _one_pass(make(), 10); b = rates(ds)
    ds = make(); c = rates(ds)
    print(f"same object passed first {a:.0f}; other object passed {b:.0f}; none {c:.0f}")
