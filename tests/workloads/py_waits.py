# Threads blocked in time.sleep, queue.get, socket.recv and a held lock,
# each two functions deep, for python_frames_test.cpp (issue #32): it prints
# "ready PID lock=TID queue=TID recv=TID sleep=TID" once all are running,
# and exits after the seconds of its first argument (default: 1000).
import os, queue, socket, sys, threading, time

def sleep_inner():
    time.sleep(0.05)

def sleep_outer():
    while True:
        sleep_inner()

def queue_inner(q):
    try:
        q.get(timeout=0.05)
    except queue.Empty:
        pass

def queue_outer():
    q = queue.Queue()
    while True:
        queue_inner(q)

def recv_inner(s):
    try:
        s.recv(16)
    except socket.timeout:
        pass

def recv_outer():
    a, b = socket.socketpair()
    a.settimeout(0.05)
    while True:
        recv_inner(a)

def lock_inner(lock):
    lock.acquire(timeout=0.05)

def lock_outer():
    lock = threading.Lock()
    lock.acquire()
    while True:
        lock_inner(lock)

ids = {}
def run(name, f):
    ids[name] = threading.get_native_id()
    f()

for name, f in (("sleep", sleep_outer), ("queue", queue_outer),
                ("recv", recv_outer), ("lock", lock_outer)):
    threading.Thread(target=run, args=(name, f), daemon=True).start()
while len(ids) < 4:
    time.sleep(0.01)
print("ready", os.getpid(), " ".join("%s=%d" % kv for kv in sorted(ids.items())),
      flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 1000)
