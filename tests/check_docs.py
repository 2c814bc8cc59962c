#!/usr/bin/python3
"""check_docs.py -- `make docs-check` (part of `make test`): the examples of
README.md and docs/*.md run against the server, so that none goes stale.

1. Starts the server ($ATTN_SERVER, default build/attention-server) as `make
   run` starts it -- its default settings, so model_repository `models` and
   static_dir `web` -- from a scratch directory (build/docs-check/run/) that
   holds a copy of models/ (one example replaces a model's file) and links to
   web/ and examples/, on a free loopback port (and its gRPC side on
   another), with ATTN_ADMIN_TOKEN set (the model repository examples need
   it; the examples read it as $TOKEN). Waits until it is ready (the
   start-up loads are done).
2. Runs every ```sh block that talks to the server (localhost:${ATTN_PORT:-8080},
   examples/v2_client.py; gRPC: localhost:${ATTN_GRPC_PORT:-8001},
   examples/grpc_client.mjs), in the order of its file, one bash per file
   (`set -e -o pipefail`; a block may use what an earlier block of the same
   file made), in the scratch directory, with ATTN_PORT and ATTN_GRPC_PORT
   set to the server's ports (the npm packages of package-lock.json
   installed first when a block runs a Node example), and with numpy hidden
   from Python (`make run` does not install it:
   the examples need only the standard library). curl is wrapped: an HTTP
   status of 400 or more fails the block unless the block says `# answers
   NNN` with that status; `# answers NNN slug` also wants the body's
   error.code to be that slug (POST /attention's form: v2's bodies,
   {"error": "..."}, carry none). A block that cannot run here must match
   one of SKIPS below, which says why; a sh block that neither runs nor is
   listed fails the check, and so does a command in a block not marked sh.
   The blocks of a file leave no new file behind, in the scratch directory
   (a reader's checkout) or in the repository (`git status --porcelain`).
3. Every model an example names (/v2/models/X, "model": "X", --model X) is
   the built-in `attention` or a folder of models/.
4. Every relative link and image of those files resolves: the file exists,
   and an anchor (#...) is a heading of it (GitHub's heading ids).
5. Copied as written, every command works from the repository's root, on
   whatever port the reader's server has (PORT_RULES): a sh block reaches
   the server as localhost:${ATTN_PORT:-8080}, the port the server itself
   reads (README.md, Example), and its gRPC side as
   localhost:${ATTN_GRPC_PORT:-8001} (grpc_port's variable), never a
   literal port; a command (in a sh
   block or inline code) that runs the server names build/attention-server
   (or is `make run`), not a bare `attention-server`; and a block that
   starts a second server says to stop the first one (or gives another
   port). Every Python file of examples/ imports only the standard library.

Prints what ran and what was skipped, and exits 1 on any failure.
Usage: tests/check_docs.py [FILE.md ...]   (default: README.md docs/*.md)
"""
import ast
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SERVER = os.path.abspath(os.path.join(ROOT, os.environ.get("ATTN_SERVER", "build/attention-server")))
WORK = os.path.join(ROOT, "build", "docs-check")
TOKEN = "docs-check-admin-token-0123456789"

# Blocks that cannot run against the test server: a pattern found in the
# block, and why it does not run. Each must match some block (a stale entry
# fails the check too).
SKIPS = [
    (r"^make run +# ", "starts the server itself (this check starts it the same way) and "
                       "`make test`, which runs this check"),
    (r"^docker (build|run)", "needs a Docker engine; `make container-test` builds and checks "
                             "the images with podman"),
    (r"^kubectl ", "needs a Kubernetes cluster; `make deploy-check` renders and validates "
                   "the manifests offline and checks them against the server"),
    (r"^openssl req ", "starts a second server with TLS (the HTTP tests cover TLS and its "
                       "start-up line: tests/server/test_http_tls_cors.c)"),
    (r"^curl --cacert ", "talks to the TLS server of the block before"),
    (r"^ATTN_ADMIN_TOKEN=\$TOKEN ", "starts a server with an admin token: this check "
                                    "starts its own that way"),
    (r"examples/offload/", "the decoder needs python3-torch, which make run does not install: "
                           "make offload-check (part of make test) runs these blocks against "
                           "a server started as make run starts it"),
    (r"train_(digits_reverse|induction)\.py",
     "retrains the model: minutes of CPU, and it rewrites models/ (byte for byte the same)"),
]

# How a sh block reaches the server: the one port variable (the server's own
# setting, ATTN_PORT; 8080 when unset), so that a reader on another port
# sets it once.
PORT_REF = "${ATTN_PORT:-8080}"
GRPC_PORT_REF = "${ATTN_GRPC_PORT:-8001}"   # the gRPC side's (grpc_port)
TALKS = re.compile(r"(?:localhost|127\.0\.0\.1):(?:" + re.escape(PORT_REF) + "|"
                   + re.escape(GRPC_PORT_REF) + r")|examples/v2_client\.py|examples/grpc_client\.mjs")
NODE_EXAMPLE = re.compile(r"examples/\S+\.mjs")
PORT_RULES = [
    (re.compile(r"(?:localhost|127\.0\.0\.1|\[::1\]):\d+"),
     "a literal port: write localhost:" + PORT_REF + " (README.md, Example), or for gRPC "
     "localhost:" + GRPC_PORT_REF),
    (re.compile(r"\$ATTN_PORT\b|\$\{ATTN_PORT\}"),
     "ATTN_PORT without its default: write " + PORT_REF),
    (re.compile(r"\$ATTN_GRPC_PORT\b|\$\{ATTN_GRPC_PORT\}"),
     "ATTN_GRPC_PORT without its default: write " + GRPC_PORT_REF),
]
# A command that runs the server: its first word (after VAR=value words), at
# the start of a line or after ;, &&, || or |.
SERVER_CMD = re.compile(r"(?:^|[;&|]\s*)(?:\w+=\S*\s+)*(\S*attention-server)(?=\s|$)", re.M)
FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(path):
    """The fenced blocks of a Markdown file: (info string, first line number, text)."""
    out, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if cur is None and m:
                cur = (m.group(1), n + 1, [])
            elif cur is not None and line.rstrip() == "```":
                out.append((cur[0], cur[1], "".join(cur[2])))
                cur = None
            elif cur is not None:
                cur[2].append(line)
    return out


def slug(heading, seen):
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to
    hyphens, -1, -2, ... for repeats."""
    s = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    s = re.sub(r"[^\w\- ]", "", s.lower()).replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


def anchors(path):
    seen, ids, infence = {}, set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                infence = not infence
            elif not infence and re.match(r"#{1,6} ", line):
                ids.add(slug(line.lstrip("#"), seen))
    return ids


def check_links(path, errors):
    """Every relative link and image of `path` resolves; returns how many."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)   # code blocks
    text = re.sub(r"`[^`\n]*`", "", text)                          # inline code
    n = 0
    for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        n += 1
        file, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            errors.append(f"{os.path.relpath(path, ROOT)}: link to {target}: "
                          f"{os.path.relpath(dest, ROOT)} does not exist")
        elif frag and (not dest.endswith(".md") or frag not in anchors(dest)):
            errors.append(f"{os.path.relpath(path, ROOT)}: link to {target}: "
                          f"no heading '#{frag}' in {os.path.relpath(dest, ROOT)}")
    return n


def check_commands(rel, line, text, errors):
    """Rule 5 on a sh block's text (any block, run or skipped)."""
    code = "\n".join(s for s in text.splitlines() if not s.lstrip().startswith("#"))
    for rule, why in PORT_RULES:
        for m in rule.finditer(code):
            errors.append(f"{rel}:{line}: '{m.group(0)}': {why}")
    starts = False
    for m in SERVER_CMD.finditer(code):
        cmd = m.group(1)
        # build/attention-server is the path make builds; under SANITIZE a
        # clean tree has build/san/'s only, so it need not exist yet
        if cmd != "build/attention-server" and ("/" not in cmd or
                                                not os.path.exists(os.path.join(ROOT, cmd))):
            errors.append(f"{rel}:{line}: runs '{cmd}', which is not a path from the "
                          f"repository's root: write build/attention-server, or make run ARGS=...")
        rest = code[m.end():].split("\n", 1)[0]
        starts |= "--help" not in rest
    if starts and not re.search(r"#.*\bstop\b|--port|ATTN_PORT=", text):
        errors.append(f"{rel}:{line}: starts a server while make run's holds the port: say to "
                      f"stop that one first (a # comment with 'stop'), or give another port")


def check_inline(path, errors):
    """Rule 5 on inline code: a command that runs the server names a path."""
    rel = os.path.relpath(path, ROOT)
    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    for m in re.finditer(r"`((?:\S*/)?attention-server) --[^`]*`", text):
        if "/" not in m.group(1):
            n = text.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}: inline `{m.group(0)[1:-1]}` (near line {n}, outside code "
                          f"blocks): write build/attention-server (or make run ARGS=...)")


def check_examples_stdlib(errors):
    """Every Python file of examples/ imports only the standard library:
    `make run` installs no Python package."""
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.py"))):
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                if name.split(".")[0] not in sys.stdlib_module_names:
                    errors.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: imports "
                                  f"'{name}', not in Python's standard library (make run "
                                  f"installs no Python package)")


def tree_files(top):
    """The files under top, not following symlinks (web/ and examples/ are
    the repository's: git status covers them)."""
    out = set()
    for d, dirs, files in os.walk(top):
        out.update(os.path.relpath(os.path.join(d, f), top) for f in files)
    return out


def git_status():
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


def check_models(path, line, text, errors):
    names = re.findall(r"/v2/(?:repository/)?models/([A-Za-z0-9._-]+)", text)
    names += re.findall(r'"model": *"([^"]+)"', text) + re.findall(r"--model[ =](\S+)", text)
    served = set(os.listdir(os.path.join(ROOT, "models"))) | {"attention", "stats"}
    for name in names:
        if name not in served:
            errors.append(f"{os.path.relpath(path, ROOT)}:{line}: the example names model "
                          f"'{name}', which models/ does not hold")


# The shell every file's runnable blocks run in. curl reports its status on
# stderr (-w %{stderr}), which the wrapper takes back out; its output is
# kept to read the error's slug. ALLOW holds the block's "NNN" and
# "NNN:slug" (# answers NNN [slug]).
PRELUDE = r"""
set -e -o pipefail
curl() {
    local err out rc st code want
    err=$(mktemp)
    out=$(mktemp)
    rc=0
    command curl -w '%{stderr}@@status %{http_code}\n' "$@" 2>"$err" | tee "$out" || rc=$?
    st=$(sed -n 's/^@@status //p' "$err" | tail -n 1)
    grep -v '^@@status ' "$err" >&2 || true
    code=$(sed -n 's/.*"error":{"code":"\([a-z_]*\)".*/\1/p' "$out" | head -n 1)
    rm -f "$err" "$out"
    if [ "$rc" -ne 0 ]; then echo "check_docs: curl exited with status $rc" >&2; return "$rc"; fi
    case "$st" in [0-9][0-9][0-9]) ;; *) echo "check_docs: no HTTP status from curl" >&2; return 1;; esac
    [ "$st" -ge 400 ] || return 0
    case " $ALLOW " in
    *" $st "*) ;;
    *" $st:"*)
        case " $ALLOW " in *" $st:$code "*) ;; *)
            want=$(printf '%s\n' $ALLOW | sed -n "s/^$st://p" | tr '\n' ' ')
            echo "check_docs: HTTP $st with error code '$code'; the block says # answers $st $want" >&2
            return 22;;
        esac;;
    *) echo "check_docs: HTTP $st" >&2; return 22;;
    esac
}
"""
# numpy hidden from the examples' Python, as on a machine after `make run`
NO_NUMPY = ('raise ImportError("numpy is hidden by tests/check_docs.py: make run does not '
            'install it; the documented examples use the standard library only")\n')


def free_port():
    """A loopback port nothing listens on now (for the gRPC side, whose
    port 0 means off rather than a free one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server():
    """Returns (process, HTTP port, gRPC port, scratch directory)."""
    run = os.path.join(WORK, "run")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(run)
    shutil.copytree(os.path.join(ROOT, "models"), os.path.join(run, "models"))
    for d in ("web", "examples"):
        os.symlink(os.path.join(ROOT, d), os.path.join(run, d))
    if not os.access(SERVER, os.X_OK):
        sys.exit(f"check_docs: {SERVER} is missing: make build/attention-server")
    env = dict(os.environ, ATTN_ADMIN_TOKEN=TOKEN)
    log = open(os.path.join(WORK, "server.log"), "wb")
    env.pop("ATTN_PORT", None)
    env.pop("ATTN_GRPC_PORT", None)
    grpc_port = free_port()
    proc = subprocess.Popen([SERVER, "--port", "0", "--bind", "127.0.0.1",
                             "--grpc-port", str(grpc_port)], cwd=run, env=env,
                            stdout=log, stderr=subprocess.PIPE)
    port, seen = None, b""
    deadline = time.time() + 20
    while port is None and time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.write(line)
        seen += line
        m = re.search(rb"listening on https?://127\.0\.0\.1:(\d+)", line)
        port = int(m.group(1)) if m else None
    if port is None:
        proc.kill()
        sys.exit(f"check_docs: the server did not start:\n{seen.decode(errors='replace')}")
    # keep draining its log (the access log) so that it never blocks
    subprocess.Popen(["cat"], stdin=proc.stderr, stdout=log)
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2):
                break
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    else:
        proc.kill()
        sys.exit("check_docs: the server was not ready within 20 s")
    return proc, port, grpc_port, run


def stop_server(proc, logpath, errors):
    """SIGTERM; a non-zero exit status and the sanitizers' reports in the
    server's log go to errors (tests/check_offload.py uses it too)."""
    proc.terminate()
    try:
        proc.wait(timeout=25)
    except subprocess.TimeoutExpired:
        proc.kill()
    if proc.returncode not in (0, None):
        errors.append(f"the server exited with status {proc.returncode} after SIGTERM")
    slog = open(logpath, encoding="utf-8", errors="replace").read()
    for s in re.findall(r".*(?:Sanitizer|runtime error:).*", slog):
        errors.append(f"the server's log ({os.path.relpath(logpath, ROOT)}): {s}")


def main():
    files = sys.argv[1:] or ["README.md"] + sorted(glob.glob("docs/*.md"))
    files = [os.path.join(ROOT, f) for f in files]
    errors, plan, used = [], [], set()
    skipped = []
    nlinks = 0
    check_examples_stdlib(errors)
    for path in files:
        rel = os.path.relpath(path, ROOT)
        nlinks += check_links(path, errors)
        check_inline(path, errors)
        runnable = []
        for info, line, text in blocks(path):
            if info not in ("sh", "bash"):
                if re.search(r"^(\$ |curl |kubectl |docker |make )", text, re.M):
                    errors.append(f"{rel}:{line}: a command in a block not marked sh")
                continue
            check_commands(rel, line, text, errors)
            answers = re.findall(r"# answers (\d{3})(?: ([a-z_]+))?", text)
            if {s for s, slug in answers if slug} & {s for s, slug in answers if not slug}:
                errors.append(f"{rel}:{line}: '# answers NNN' and '# answers NNN slug' for one "
                              f"status in one block: split the block")
            skip = next((i for i, (pat, _) in enumerate(SKIPS) if re.search(pat, text, re.M)), None)
            if skip is not None:
                used.add(skip)
                skipped.append((rel, line, SKIPS[skip][1]))
            elif TALKS.search(text):
                check_models(path, line, text, errors)
                runnable.append((line, text))
            else:
                errors.append(f"{rel}:{line}: a sh block that does not talk to the server "
                              f"and is not listed in tests/check_docs.py's SKIPS")
        if runnable:
            plan.append((rel, runnable))
    for i, (pat, why) in enumerate(SKIPS):
        if i not in used and not sys.argv[1:]:
            errors.append(f"tests/check_docs.py: SKIPS entry {pat!r} matches no block")

    ran = 0
    if plan:
        if any(NODE_EXAMPLE.search(t) for _, runnable in plan for _, t in runnable):
            # the Node examples' packages (@grpc/grpc-js, ...), as make test installs them
            subprocess.run(["bash", "-c", ". scripts/lib.sh && npm_ci @grpc/grpc-js @grpc/proto-loader"],
                           cwd=ROOT, check=True)
        proc, port, grpc_port, run = start_server()
        nonumpy = os.path.join(WORK, "nonumpy")
        os.makedirs(os.path.join(nonumpy, "numpy"))
        with open(os.path.join(nonumpy, "numpy", "__init__.py"), "w") as f:
            f.write(NO_NUMPY)
        try:
            for rel, runnable in plan:
                script = [PRELUDE]
                for k, (line, text) in enumerate(runnable):
                    allow = " ".join(s + (":" + slug if slug else "") for s, slug in
                                     re.findall(r"# answers (\d{3})(?: ([a-z_]+))?", text))
                    script.append(f"echo {k} > \"$CHECK_DOCS_AT\"\nALLOW='{allow}'\n{text}\n")
                at = os.path.join(WORK, "at")
                logpath = os.path.join(WORK, rel.replace("/", "_") + ".log")
                before, status = tree_files(run), git_status()
                with open(logpath, "wb") as log:
                    r = subprocess.run(["bash", "-c", "".join(script)], cwd=run, stdout=log,
                                       stderr=subprocess.STDOUT, timeout=300,
                                       env=dict(os.environ, TOKEN=TOKEN, CHECK_DOCS_AT=at,
                                                ATTN_PORT=str(port),
                                                ATTN_GRPC_PORT=str(grpc_port),
                                                PYTHONPATH=nonumpy))
                left = sorted(tree_files(run) - before)
                if left:
                    errors.append(f"{rel}: its examples leave {', '.join(left)} in the "
                                  f"directory they run in (a reader's checkout): use a "
                                  f"temporary directory, and remove it")
                changed = sorted(set(git_status().splitlines()) - set(status.splitlines()))
                if changed:
                    errors.append(f"{rel}: its examples change the repository (git status "
                                  f"--porcelain): {'; '.join(changed)}")
                k = int(open(at).read()) if os.path.exists(at) else 0
                if r.returncode == 0:
                    ran += len(runnable)
                    print(f"ok   {rel}: {len(runnable)} example(s) ran")
                    continue
                ran += k
                line = runnable[k][0]
                out = open(logpath, encoding="utf-8", errors="replace").read()
                errors.append(f"{rel}:{line}: the example failed (exit status {r.returncode}); "
                              f"its output ({os.path.relpath(logpath, ROOT)}) ends:\n"
                              + "\n".join("    " + s[-300:] for s in out.splitlines()[-15:]))
        finally:
            stop_server(proc, os.path.join(WORK, "server.log"), errors)
    for rel, line, why in skipped:
        print(f"skip {rel}:{line}: {why}")
    for e in errors:
        print(f"FAIL {e}", file=sys.stderr)
    print(f"docs-check: {ran} example(s) ran against the server, {len(skipped)} skipped "
          f"(reasons above), {nlinks} relative link(s) checked; {len(errors)} failure(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
