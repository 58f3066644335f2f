import subprocess, sys, time, threading, os
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from plumbkit.host.machine import read_machine, neighbour_cores
def spin(n):
    return subprocess.Popen(["nice", "-n", str(n), sys.executable, "-c", "while True: pass"], start_new_session=True)
import multiprocessing as mp
def burn(sec):
    t=time.time()
    while time.time()-t<sec: pass
for nic in (None, 19):
    p = spin(nic) if nic is not None else None
    time.sleep(0.3)
    a=read_machine()
    procs=[mp.Process(target=burn,args=(2.0,)) for _ in range(2)]
    t0=time.time(); c0=os.times()
    [q.start() for q in procs]; [q.join() for q in procs]
    c1=os.times(); b=read_machine()
    print(f"neighbour nice={nic}: our 2 spinners got {(c1.children_user+c1.children_system-c0.children_user-c0.children_system)/(time.time()-t0):.2f} cores; neighbours read {neighbour_cores(a,b)}")
    if p: p.kill(); p.wait()
