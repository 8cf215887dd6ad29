"""it_serve_tls: TLS and mutual TLS from --ssl_config_file (TF Serving's
SSLConfig text format), on the gRPC and REST ports, with certificates made by
`openssl` at test time.

1. TLS: a client trusting the right CA gets Predict answered (gRPC and REST);
   one trusting another CA fails; a plaintext client fails.
2. mTLS (client_verify: true, custom_ca): a client certificate from the right
   CA succeeds; one from another CA fails; no client certificate fails
   (gRPC: the handshake; REST: the handshake or 403).
3. SIGHUP re-reads the certificates: after the file names a server
   certificate from a second CA, new gRPC and REST connections trusting that
   CA succeed and those trusting only the first fail; a broken file or a key
   GnuTLS cannot read keeps the old ones on both. With mTLS, after SIGHUP
   names another custom_ca, client certificates of the new CA pass and those
   of the old one fail (gRPC and REST).
4. The admin RPC over mTLS from a non-loopback address (when the machine has
   one): refused without a certificate CN in --admin_client_cn, allowed with.
5. --max_connections applies to the TLS port (connections go through our
   listener, srv_listen.c, into gRPC's TLS handshake): with 4 TCP connections
   open, a 5th is closed and a TLS Predict fails UNAVAILABLE; once two close,
   Predict is answered again.
6. Descriptor exhaustion on the TLS port: with the daemon's RLIMIT_NOFILE at
   1024 (prlimit), 1,100 idle TCP connections to the TLS port until accept
   fails with EMFILE; once they close, TLS Predict on gRPC and on REST is
   answered again and the model stayed loaded (the plaintext port's case is
   it_serve_outages).
Expected answers come from half_plus_two's definition y = 0.5 x + 2.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (HPT, SKIP_RC, WAIT, Daemon, Stubs, answered_within, check,  # noqa: E402
                          exhaust_fds, exhaustion_survived, fd_exhaustion_possible,
                          float_tensor, free_port, gen_protos, tensor_values)

pb = gen_protos()
X = [1.0, 2.0, 5.0]
Y = [0.5 * v + 2.0 for v in X]


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_ca(d, name):
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
       "-subj", "/CN=%s" % name, "-keyout", name + ".key", "-out", name + ".crt", cwd=d)


def make_cert(d, ca, name, cn, server=False):
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % cn,
       "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        if server:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    sh("openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
       "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".crt", cwd=d)


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def pbtxt_string(pem):
    return '"' + pem.decode().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_ssl_config(path, d, key, cert, ca=None, verify=False):
    with open(path, "w") as f:
        f.write("server_key: %s\n" % pbtxt_string(read(d, key)))
        f.write("server_cert: %s\n" % pbtxt_string(read(d, cert)))
        if ca:
            f.write("custom_ca: %s\n" % pbtxt_string(read(d, ca)))
        f.write("client_verify: %s\n" % ("true" if verify else "false"))


def predict_req():
    r = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
    r.inputs["x"].CopyFrom(float_tensor(X, [3, 1]))
    return r


def grpc_predict(port, d, root, client=None, host="localhost"):
    """Predict over a TLS channel; returns the answer or raises grpc.RpcError."""
    key = read(d, client + ".key") if client else None
    crt = read(d, client + ".crt") if client else None
    creds = grpc.ssl_channel_credentials(root_certificates=read(d, root + ".crt"),
                                         private_key=key, certificate_chain=crt)
    ch = grpc.secure_channel("%s:%d" % (host, port), creds)
    try:
        r = Stubs(ch).Predict(predict_req(), timeout=10)
        return tensor_values(r.outputs["y"])
    finally:
        ch.close()


def fails(fn):
    try:
        fn()
    except (grpc.RpcError, ssl.SSLError, ConnectionError, OSError) as e:
        return e
    return None


def rest_predict(port, d, root, client=None):
    ctx = ssl.create_default_context(cafile=os.path.join(d, root + ".crt"))
    if client:
        ctx.load_cert_chain(os.path.join(d, client + ".crt"), os.path.join(d, client + ".key"))
    c = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
    try:
        c.request("POST", "/v1/models/hpt:predict", body=json.dumps({"instances": [[v] for v in X]}))
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise ConnectionError("REST status %d: %s" % (r.status, body[:200]))
        return [v[0] for v in json.loads(body)["predictions"]]
    finally:
        c.close()


def plain_grpc_fails(port):
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    try:
        Stubs(ch).Predict(predict_req(), timeout=5)
        return False
    except grpc.RpcError:
        return True
    finally:
        ch.close()


def tls_fd_exhaustion(d, cfg):
    """Section 6: the TLS port (and REST over TLS) after EMFILE."""
    if not fd_exhaustion_possible("it_serve_tls"):
        return
    write_ssl_config(cfg, d, "server1.key", "server1.crt")
    rest = free_port()
    dm = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--ssl_config_file=" + cfg,
                 "--rest_api_port=%d" % rest, "--file_system_poll_wait_seconds=0.2"])
    try:
        dm.channel.close()  # plaintext to the TLS port: it would only hold a connection
        check(np.allclose(answered_within(lambda: grpc_predict(dm.port, d, "ca1"), 20,
                                          "TLS Predict never answered", dm), Y),
              "TLS Predict before EMFILE", dm)
        exhaust_fds(dm, dm.port)  # TCP connections that never start the handshake
        got = answered_within(lambda: grpc_predict(dm.port, d, "ca1"), 20,
                              "no TLS answer after the connections closed", dm)
        check(np.allclose(got, Y), "TLS Predict after EMFILE gave %s" % got, dm)
        got = answered_within(lambda: rest_predict(rest, d, "ca1"), 20,
                              "no REST (TLS) answer after the connections closed", dm)
        check(np.allclose(got, Y), "REST Predict after EMFILE gave %s" % got, dm)
        creds = grpc.ssl_channel_credentials(root_certificates=read(d, "ca1.crt"))
        ch = grpc.secure_channel("localhost:%d" % dm.port, creds)
        try:
            exhaustion_survived(dm, Stubs(ch))
        finally:
            ch.close()
        check(dm.stop() == 0, "TLS (EMFILE) daemon exit code", dm)
    finally:
        dm.close()
    print("it_serve_tls: descriptor exhaustion on the TLS port ok")


def non_loopback_ip():
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.1", 9))  # no packet is sent
        ip = s.getsockname()[0]
        s.close()
        return None if ip.startswith("127.") else ip
    except OSError:
        return None


def main():
    if shutil.which("openssl") is None:
        print("SKIP: openssl not installed (scripts/install_deps.sh all)")
        return SKIP_RC
    d = tempfile.mkdtemp(prefix="dcm_tls_")
    make_ca(d, "ca1")
    make_ca(d, "ca2")
    make_cert(d, "ca1", "server1", "localhost", server=True)
    make_cert(d, "ca2", "server2", "localhost", server=True)
    make_cert(d, "ca1", "client1", "admin-client")
    make_cert(d, "ca1", "client1b", "someone-else")
    make_cert(d, "ca2", "client2", "admin-client")
    cfg = os.path.join(d, "ssl.pbtxt")

    # --- 1. TLS without client certificates ---
    write_ssl_config(cfg, d, "server1.key", "server1.crt")
    rest = free_port()
    dm = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--ssl_config_file=" + cfg,
                 "--rest_api_port=%d" % rest])
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                got = grpc_predict(dm.port, d, "ca1")
                break
            except grpc.RpcError as e:
                if time.monotonic() > deadline:
                    raise AssertionError("TLS Predict never answered: %s\n%s" % (e, dm.log_tail()))
                time.sleep(0.2)
        check(np.allclose(got, Y), "TLS Predict gave %s" % got, dm)
        check(fails(lambda: grpc_predict(dm.port, d, "ca2")) is not None,
              "a client trusting another CA was answered", dm)
        check(plain_grpc_fails(dm.port), "a plaintext client was answered on the TLS port", dm)
        got = rest_predict(rest, d, "ca1")
        check(np.allclose(got, Y), "TLS REST gave %s" % got, dm)
        check(fails(lambda: rest_predict(rest, d, "ca2")) is not None,
              "a REST client trusting another CA was answered", dm)
        check("gRPC listening" in dm.log() and "TLS" in dm.log(), "log does not say TLS", dm)

        # --- 3. SIGHUP re-reads the certificates ---
        write_ssl_config(cfg, d, "server2.key", "server2.crt")
        dm.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT
        while "TLS certificates re-read" not in dm.log():
            check(time.monotonic() < deadline, "SIGHUP: certificates not re-read", dm)
            time.sleep(0.1)
        got = grpc_predict(dm.port, d, "ca2")
        check(np.allclose(got, Y), "after SIGHUP, Predict via the new CA gave %s" % got, dm)
        check(fails(lambda: grpc_predict(dm.port, d, "ca1")) is not None,
              "after SIGHUP, a client trusting only the old CA was still answered", dm)
        got = rest_predict(rest, d, "ca2")
        check(np.allclose(got, Y), "after SIGHUP, REST via the new CA gave %s" % got, dm)
        check(fails(lambda: rest_predict(rest, d, "ca1")) is not None,
              "after SIGHUP, a REST client trusting only the old CA was still answered", dm)
        # A broken file on SIGHUP keeps the current certificates.
        with open(cfg, "w") as f:
            f.write("server_key: \"\"\n")
        dm.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT
        while "TLS certificates not reloaded" not in dm.log():
            check(time.monotonic() < deadline, "SIGHUP with a broken file: no error logged", dm)
            time.sleep(0.1)
        got = grpc_predict(dm.port, d, "ca2")
        check(np.allclose(got, Y), "after a broken SIGHUP, Predict gave %s" % got, dm)
        got = rest_predict(rest, d, "ca2")
        check(np.allclose(got, Y), "after a broken SIGHUP, REST gave %s" % got, dm)
        # A key GnuTLS cannot read fails the whole reload (gRPC and REST keep theirs).
        write_ssl_config(cfg, d, "server1.crt", "server1.crt")
        n_err = dm.log().count("TLS certificates not reloaded")
        dm.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT
        while dm.log().count("TLS certificates not reloaded") <= n_err:
            check(time.monotonic() < deadline, "SIGHUP with a bad key: no error logged", dm)
            time.sleep(0.1)
        check(np.allclose(rest_predict(rest, d, "ca2"), Y), "REST after a bad key", dm)
        check(np.allclose(grpc_predict(dm.port, d, "ca2"), Y), "gRPC after a bad key", dm)
        check(dm.stop() == 0, "TLS daemon exit code", dm)
    finally:
        dm.close()

    # --- 2. mutual TLS ---
    write_ssl_config(cfg, d, "server1.key", "server1.crt", ca="ca1.crt", verify=True)
    rest = free_port()
    ip = non_loopback_ip()
    args = ["--model_name=hpt", "--model_base_path=" + HPT, "--ssl_config_file=" + cfg,
            "--rest_api_port=%d" % rest, "--enable_reload_config_rpc",
            "--admin_client_cn=admin-client"]
    dm = Daemon(args)
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                got = grpc_predict(dm.port, d, "ca1", client="client1")
                break
            except grpc.RpcError as e:
                if time.monotonic() > deadline:
                    raise AssertionError("mTLS Predict never answered: %s\n%s" % (e, dm.log_tail()))
                time.sleep(0.2)
        check(np.allclose(got, Y), "mTLS Predict gave %s" % got, dm)
        e = fails(lambda: grpc_predict(dm.port, d, "ca1", client="client2"))
        check(e is not None, "gRPC: a client certificate from another CA was accepted", dm)
        e = fails(lambda: grpc_predict(dm.port, d, "ca1"))
        check(e is not None, "gRPC: a client without a certificate was answered", dm)
        got = rest_predict(rest, d, "ca1", client="client1")
        check(np.allclose(got, Y), "mTLS REST gave %s" % got, dm)
        e = fails(lambda: rest_predict(rest, d, "ca1", client="client2"))
        check(e is not None, "REST: a client certificate from another CA was accepted", dm)
        e = fails(lambda: rest_predict(rest, d, "ca1"))
        check(e is not None, "REST: a client without a certificate was answered", dm)
        # SIGHUP with custom_ca now ca2: client certificates of ca2 pass, of ca1 fail.
        write_ssl_config(cfg, d, "server1.key", "server1.crt", ca="ca2.crt", verify=True)
        dm.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + WAIT
        while "TLS certificates re-read" not in dm.log():
            check(time.monotonic() < deadline, "mTLS SIGHUP: certificates not re-read", dm)
            time.sleep(0.1)
        got = rest_predict(rest, d, "ca1", client="client2")
        check(np.allclose(got, Y), "after SIGHUP, mTLS REST with the new CA's client gave %s" % got,
              dm)
        e = fails(lambda: rest_predict(rest, d, "ca1", client="client1"))
        check(e is not None, "after SIGHUP, REST accepted a client of the old CA", dm)
        got = grpc_predict(dm.port, d, "ca1", client="client2")
        check(np.allclose(got, Y), "after SIGHUP, mTLS gRPC with the new CA's client gave %s" % got,
              dm)
        e = fails(lambda: grpc_predict(dm.port, d, "ca1", client="client1"))
        check(e is not None, "after SIGHUP, gRPC accepted a client of the old CA", dm)
        check(dm.stop() == 0, "mTLS daemon exit code", dm)
    finally:
        dm.close()

    # --- 5. --max_connections on the TLS port (our listener feeds gRPC's TLS) ---
    write_ssl_config(cfg, d, "server1.key", "server1.crt")
    dm = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--ssl_config_file=" + cfg,
                 "--max_connections=4"])
    socks = []
    try:
        dm.channel.close()  # a plaintext channel to the TLS port would hold a connection
        deadline = time.monotonic() + WAIT
        while True:
            try:
                got = grpc_predict(dm.port, d, "ca1")
                break
            except grpc.RpcError as e:
                if time.monotonic() > deadline:
                    raise AssertionError("TLS Predict never answered: %s\n%s" % (e, dm.log_tail()))
                time.sleep(0.2)
        check(np.allclose(got, Y), "TLS Predict (limit 4) gave %s" % got, dm)
        time.sleep(0.5)  # the Predict channel is closed and counted out
        for _ in range(4):  # TCP connections that never start the handshake
            socks.append(socket.create_connection(("127.0.0.1", dm.port), timeout=5))
        time.sleep(0.5)
        e = fails(lambda: grpc_predict(dm.port, d, "ca1"))
        check(isinstance(e, grpc.RpcError) and e.code() == grpc.StatusCode.UNAVAILABLE,
              "connection 5 on the TLS port: want UNAVAILABLE, got %r" % (e,), dm)
        extra = socket.create_connection(("127.0.0.1", dm.port), timeout=5)
        try:
            closed = extra.recv(100) == b""
        except ConnectionError:
            closed = True
        except socket.timeout:
            closed = False
        extra.close()
        check(closed, "connection 5 on the TLS port was not closed", dm)
        check("--max_connections" in dm.log(), "TLS refusal not logged", dm)
        check("gRPC's own TLS listener" not in dm.log(),
              "the daemon says the limit does not apply to TLS", dm)
        for x in socks[:2]:
            x.close()
        deadline = time.monotonic() + WAIT
        while True:
            try:
                got = grpc_predict(dm.port, d, "ca1")
                break
            except grpc.RpcError as e:
                check(time.monotonic() < deadline,
                      "no TLS answer below the limit again: %s" % e, dm)
                time.sleep(0.2)
        check(np.allclose(got, Y), "TLS Predict below the limit gave %s" % got, dm)
        check(dm.stop() == 0, "TLS (limit) daemon exit code", dm)
    finally:
        for x in socks:
            x.close()
        dm.close()

    # --- 4. the admin RPC from a non-loopback address, over mTLS ---
    if ip is None:
        print("it_serve_tls: no non-loopback address here; admin CN check over the network skipped")
    else:
        env = dict(os.environ)
        # sections 2 and 5 rewrote the file: back to mTLS with ca1
        write_ssl_config(cfg, d, "server1.key", "server1.crt", ca="ca1.crt", verify=True)
        cmd_args = args + ["--bind_address=0.0.0.0"]
        # Daemon() adds --bind_address=127.0.0.1 first; the later flag wins.
        dm = Daemon(cmd_args, env=env)
        try:
            def reload_as(client):
                creds = grpc.ssl_channel_credentials(
                    root_certificates=read(d, "ca1.crt"), private_key=read(d, client + ".key"),
                    certificate_chain=read(d, client + ".crt"))
                ch = grpc.secure_channel("%s:%d" % (ip, dm.port), creds,
                                         options=[("grpc.ssl_target_name_override", "localhost")])
                try:
                    return Stubs(ch).HandleReloadConfigRequest(pb.tfs.ReloadConfigRequest(), timeout=10)
                finally:
                    ch.close()
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    r = reload_as("client1")
                    break
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                        raise AssertionError("admin CN reload: %s %s\n%s" % (e.code(), e.details(),
                                                                           dm.log_tail()))
                    time.sleep(0.2)
            check(r.status.error_code == 0, "admin CN reload status %s" % r, dm)
            try:
                reload_as("client1b")
                check(False, "a non-admin CN from %s could call the admin RPC" % ip, dm)
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.PERMISSION_DENIED,
                      "non-admin CN: %s %s" % (e.code(), e.details()), dm)
            check("cn=someone-else" in dm.log() and "refused" in dm.log(),
                  "the refused peer is not logged", dm)
            check(dm.stop() == 0, "admin daemon exit code", dm)
        finally:
            dm.close()
    tls_fd_exhaustion(d, cfg)
    shutil.rmtree(d, ignore_errors=True)
    print("it_serve_tls: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
