# The agent soak's thread and socket churn (bench/agent-soak.sh, tests/agent_soak.rs): 20 threads
# started every half second, and 20 short loopback TCP connections each time.
import socket, threading, time
def work():
    sum(range(20000))
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64)
port = srv.getsockname()[1]
def accept():
    while True:
        c, _ = srv.accept(); c.recv(64); c.close()
threading.Thread(target=accept, daemon=True).start()
while True:
    ts = [threading.Thread(target=work) for _ in range(20)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port)); s.send(b"x" * 64); s.close()
    time.sleep(0.5)
