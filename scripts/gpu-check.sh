#!/usr/bin/env bash
# The GPU check: one run of a few minutes on a machine with GPUs proves the
# NCCL path. Every rank count runs on the GPUs there are (DISTTEST_SHARE_GPUS=1:
# 2, 4 and 8 ranks on one GPU), and each case is judged from the outside, as a
# user would read it: its verdict, the words that say why, and its time.
#
#   bash scripts/gpu-check.sh            # build (build-gpu/), then run
#   bash scripts/gpu-check.sh --install  # scripts/install-deps.sh first
#   bash scripts/gpu-check.sh --pack     # build, then gather the binaries and
#                                        # the libraries they need in gpu-pack/
#                                        # (for a GPU machine without gtest,
#                                        # fmt or Gloo); runs nothing
#   bash scripts/gpu-check.sh --no-build # run what gpu-pack/ holds, with the
#                                        # machine's own NCCL
#   bash scripts/gpu-check.sh --cpu DIR  # the script's own test, without a GPU:
#                                        # the verdict cases on Gloo, from DIR
#   bash scripts/gpu-check.sh --fake DIR # without a GPU: the cases on the
#                                        # fake CUDA and NCCL of DIR, a build
#                                        # tree with the NCCL backend, tests
#                                        # and examples (tests/fake_gpu/);
#                                        # with --no-build, on gpu-pack/'s
#                                        # binaries. Proves the harness, not
#                                        # NCCL.
#
# GPU_CHECK_BUDGET_S (default 480) bounds the whole run: a case is cut at
# the budget's end (20 s past it at most), and the cases after it are not
# run, each listed as LEFT; the summary (gpu-check-summary.txt) grows as the
# cases end, so a run cut from outside still leaves what it found. The
# cases that the GPU check must prove come first.
#
# The cases: the NCCL example (every collective, device and host buffers)
# at 1, 2, 4 and 8 ranks and in rank threads; collectives of 0 to 2^22
# elements against a serial reference; inputs that overlap their outputs
# otherwise than in place (device buffers); a mismatch (on the world and on a
# split communicator), a crash and a hang at 2 and 4 ranks, a crash while a
# peer waits in a receive, a hang and a crash in NCCL itself (a split
# communicator), and what NCCL runs without a word (a send received as
# another type, a send nobody receives, an isend never waited for, floats
# that differ in the last bit): each must fail, naming the cause, in
# bounded time; pooled
# ranks, and survivors of an expected end, which must pass; each rank's GPU
# by index, by UUID and from NVML, and a rank without a GPU; the
# communicator-creation tests and the cookbook's kAuto recipe. 8 ranks on
# one GPU is reported, not required (NCCL promises two ranks a GPU). The
# summary lists each case with its time; the full output is in
# gpu-check.log. Exits non-zero when a required case failed (a case whose
# tests all skipped included), or when nvidia-smi lists no GPU.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD

mode=build
install=0
cpu_bin=
fake_dir=
while (($#)); do
  case $1 in
    --install) install=1 ;;
    --no-build) mode=packed ;;
    --pack) mode=pack ;;
    --cpu)
      mode=cpu
      cpu_bin=${2:-}
      [[ -n $cpu_bin ]] || {
        echo "gpu-check.sh: --cpu takes the directory of gpu_check_child_" >&2
        exit 2
      }
      shift
      ;;
    --fake)
      fake_dir=${2:-}
      [[ -d $fake_dir ]] || {
        echo "gpu-check.sh: --fake takes a build directory (one with" \
          "libdisttest_fake_gpu_.so)" >&2
        exit 2
      }
      fake_dir=$(cd "$fake_dir" && pwd)
      shift
      ;;
    -h | --help)
      sed -n '2,40p' "$0"
      exit 0
      ;;
    *)
      echo "gpu-check.sh: unknown argument '$1' (it takes --install, --pack," \
        "--no-build, --cpu DIR, --fake DIR)" >&2
      exit 2
      ;;
  esac
  shift
done
if ((install)); then bash scripts/install-deps.sh || exit 1; fi

dir=$root/build-gpu
# The fake GPU: the binaries of the build tree given (or gpu-pack/'s), with
# tests/fake_gpu's CUDA and NCCL preloaded: one fake GPU, unless a case
# says more.
if [[ -n $fake_dir ]]; then
  [[ $mode == build || $mode == packed ]] || {
    echo "gpu-check.sh: --fake goes alone or with --no-build" >&2
    exit 2
  }
  fake_lib=$(find "$fake_dir" -name libdisttest_fake_gpu_.so -print -quit)
  [[ -n $fake_lib ]] || {
    echo "gpu-check.sh: no libdisttest_fake_gpu_.so in $fake_dir (a build" \
      "with the NCCL backend and the tests makes it)" >&2
    exit 2
  }
  # LD_PRELOAD takes a list split at spaces and colons.
  [[ $fake_lib != *[[:space:]:]* ]] || {
    echo "gpu-check.sh: LD_PRELOAD cannot name $fake_lib (a space or a" \
      "colon in it): build in another directory" >&2
    exit 2
  }
  [[ $mode == packed ]] || mode=fake
  dir=$fake_dir
  if [[ $mode == fake && -z $(find "$fake_dir" -name gpu_check_child_ -type f -print -quit) ]]; then
    echo "gpu-check.sh: no gpu_check_child_ in $fake_dir: build it first" \
      "(cmake -S . -B $fake_dir -DDISTTEST_BUILD_TESTS=ON" \
      "-DDISTTEST_BUILD_EXAMPLES=ON && cmake --build $fake_dir)" >&2
    exit 2
  fi
fi
pack=$root/gpu-pack
targets=(nccl_allreduce_test cookbook_test create_test gpu_check_child_)

build() {
  echo "== configure (build-gpu/, Release, DISTTEST_WITH_NCCL=ON)"
  mkdir -p "$dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DDISTTEST_WITH_NCCL=ON \
    -DDISTTEST_BUILD_TESTS=ON -DDISTTEST_BUILD_EXAMPLES=ON \
    >"$dir/configure.log" 2>&1 || {
    cat "$dir/configure.log"
    exit 1
  }
  grep 'disttest: NCCL backend' "$dir/configure.log" || true
  echo "== build"
  cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}" || exit 1
}

# Where the build put a target.
built() { find "$dir" -name "$1" -type f -perm -u+x -print -quit; }

# gpu-pack/: bin/ (the binaries, without debug information), lib/ (the
# shared libraries they need, for a GPU machine that lacks them: Gloo, fmt,
# the CUDA runtime, libstdc++, ...; not glibc or the driver, and not NCCL,
# which is hundreds of megabytes: the machine's own is used), MANIFEST.
# The binaries need glibc 2.34 or later (Debian 12's build).
make_pack() {
  rm -rf "$pack"
  mkdir -p "$pack/bin" "$pack/lib"
  local target path
  for target in "${targets[@]}"; do
    path=$(built "$target")
    [[ -n $path ]] || {
      echo "gpu-check.sh: $target is not in build-gpu/" >&2
      exit 1
    }
    cp "$path" "$pack/bin/" && strip --strip-debug "$pack/bin/$target"
  done
  ldd "$pack"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      case $name in
        linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread* | \
          librt.so* | libdl.so* | libnccl* | libcuda.so*) ;;
        *) cp -L "$path" "$pack/lib/$name" ;;
      esac
    done
  {
    echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD 2>/dev/null)"
    grep 'disttest: NCCL backend' "$dir/configure.log" || true
    (cd "$pack" && ls -l bin lib)
  } >"$pack/MANIFEST"
  echo "== gpu-pack/: $(du -sh "$pack" | cut -f1)"
  (cd "$pack" && ls bin lib | tr '\n' ' ')
  echo
}

case $mode in
  pack)
    build
    make_pack
    echo "carry gpu-pack/ to the GPU machine and run: bash scripts/gpu-check.sh --no-build"
    exit 0
    ;;
  build)
    build
    bin() { built "$1"; }
    ;;
  fake)
    bin() { built "$1"; }
    ;;
  packed)
    [[ -f $pack/MANIFEST ]] || {
      echo "gpu-check.sh: --no-build, but gpu-pack/ holds nothing: make it with" \
        "'bash scripts/gpu-check.sh --pack' on a machine with the build's tools" >&2
      exit 1
    }
    bin() { echo "$pack/bin/$1"; }
    # A copy that lost the executable bits on its way here.
    chmod u+x "$pack"/bin/* 2>/dev/null
    # The packed libraries this machine lacks (its own are kept: NCCL may
    # load its RDMA providers through them), in a folder of links.
    uses=$pack/lib-used
    rm -rf "$uses"
    mkdir -p "$uses"
    ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
    tab=$'\t'  # ldconfig -p: "<tab>libfmt.so.9 (libc6,x86-64) => /path"
    for lib in "$pack"/lib/*; do
      name=$(basename "$lib")
      "$ldconfig" -p 2>/dev/null | grep -qF "${tab}$name (libc6,x86-64)" ||
        ln -s "$lib" "$uses/$name"
    done
    # NCCL: the system's, else the one a Python package brings (PyTorch's).
    nccl_dir=
    if ! "$ldconfig" -p 2>/dev/null | grep -qF "${tab}libnccl.so.2 (libc6,x86-64)"; then
      for python in python3 "${VIRTUAL_ENV:-/nonexistent}/bin/python3" \
        "${CONDA_PREFIX:-/nonexistent}/bin/python3"; do
        nccl_dir=$("$python" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) && break
      done
      if [[ -z $nccl_dir || ! -f $nccl_dir/libnccl.so.2 ]]; then
        nccl=$(find /usr /opt /root /home ${VIRTUAL_ENV:+"$VIRTUAL_ENV"} \
          ${CONDA_PREFIX:+"$CONDA_PREFIX"} -name 'libnccl.so.2' 2>/dev/null | head -1)
        nccl_dir=${nccl:+$(dirname "$nccl")}
      fi
      if [[ -z $nccl_dir ]]; then
        echo "gpu-check.sh: no libnccl.so.2 on this machine (ldconfig, Python's" \
          "nvidia.nccl, /usr /opt /root /home): install NCCL or set LD_LIBRARY_PATH" >&2
        exit 1
      fi
    fi
    export LD_LIBRARY_PATH=$uses${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # One of the machine's copies older than the build's (libstdc++, the
    # CUDA runtime): every packed library, then.
    if ! "$(bin gpu_check_child_)" --gtest_list_tests >/dev/null 2>&1; then
      ln -sf "$pack"/lib/* "$uses/"
    fi
    if ! out=$("$(bin gpu_check_child_)" --gtest_list_tests 2>&1); then
      echo "gpu-check.sh: the packed binaries do not start here:" >&2
      echo "$out" | head -5 >&2
      exit 1
    fi
    ;;
  cpu)
    bin() { echo "$cpu_bin/$1"; }
    ;;
esac

if [[ $mode == cpu ]]; then
  logdir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-cpu.XXXXXX")
  trap 'rm -rf "$logdir"' EXIT
elif [[ -n $fake_dir ]]; then
  # Beside the binaries, never over a GPU run's log in gpu-pack/.
  logdir=$fake_dir/gpu-check-fake
  mkdir -p "$logdir"
elif [[ $mode == packed ]]; then
  logdir=$pack
else
  logdir=$dir
fi
log=$logdir/gpu-check.log
summary=$logdir/gpu-check-summary.txt
: >"$log"
: >"$summary"
budget=${GPU_CHECK_BUDGET_S:-480}
if ! [[ $budget =~ ^[0-9]+$ ]] || ((budget == 0)); then
  echo "gpu-check.sh: GPU_CHECK_BUDGET_S='$budget': expected a number of seconds" >&2
  exit 2
fi
started=$(date +%s)

unset DISTTEST_LAUNCH DISTTEST_SHARE_GPUS DISTTEST_GPUS
export DISTTEST_TIMEOUT_SCALE=1
if [[ $mode != cpu ]]; then
  # Too few GPUs is a failure here, not a skip; GPUs in nvidia-smi's order.
  export DISTTEST_REQUIRE_GPUS=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
fi
fake_env=
if [[ -n $fake_dir ]]; then
  # No driver lists the fake GPU: DISTTEST_GPUS does.
  export LD_PRELOAD=$fake_lib${LD_PRELOAD:+:$LD_PRELOAD} DISTTEST_FAKE_GPUS=1
  unset CUDA_VISIBLE_DEVICES
  # In the log's command lines, to run a case again by hand.
  fake_env="LD_PRELOAD=$fake_lib DISTTEST_FAKE_GPUS=1"
fi

results=()
if [[ -n $fake_dir ]]; then
  results+=("(a fake GPU: $fake_lib, CUDA and NCCL on host memory; this proves the harness, not NCCL or a GPU)")
  echo "${results[0]}" >>"$log"
  echo "${results[0]}" >>"$summary"
fi
required_failed=0
required_left=0

# check LABEL EXPECT MAX_S BINARY FILTER [VAR=VALUE ...] [-- PHRASE ...]
# (a PHRASE that starts with ! must not be in the output)
# EXPECT: pass (every test passes, none skips), some (none fails, some may
# skip by design) or fail (the test fails, and says each PHRASE); with a
# "?" (pass?, fail?) the case is reported, not required: NOTE when it is
# not as expected. A pass or fail case that skipped is a failure: it proved
# nothing. MAX_S bounds the run's time (and the budget's end, at most 20 s
# past it); past the budget the case is not run: LEFT.
# A VAR=VALUE may be "-u VAR" (unset it).
# A pass case stops at its first failure (--gtest_fail_fast), each test at
# 120 s (DISTTEST_TIMEOUT), with the stacks of a hang, not at MAX_S.
check() {
  local label=$1 expect=$2 max=$3 binary=$4 filter=$5
  shift 5
  local optional=0
  if [[ $expect == *'?' ]]; then
    optional=1
    expect=${expect%'?'}
  fi
  local left=$((budget - ($(date +%s) - started)))
  if ((left <= 0)); then
    local line
    line=$(printf '%-4s %-64s %7s    (not run: the budget of %d s was spent; GPU_CHECK_BUDGET_S)' \
      LEFT "$label" - "$budget")
    if ((!optional)); then required_left=1; fi
    results+=("$line")
    echo "$line"
    echo "$line" >>"$summary"
    echo "=== $line" >>"$log"
    return
  fi
  local limit=$((max + 30)) cut=0
  # The kill comes 10 s after the limit: 20 s past the budget at most.
  if ((limit > left + 10)); then
    limit=$((left + 10))
    cut=1
  fi
  local fast=()
  if [[ $expect == pass ]]; then fast=(--gtest_fail_fast); fi
  local vars=()
  while (($#)) && [[ $1 != -- ]]; do
    vars+=("$1")
    shift
  done
  if (($#)); then shift; fi
  local out=$logdir/case.out
  local t0
  t0=$(date +%s%N)
  # After the case's own (env takes its -u options first).
  if [[ $expect == pass ]]; then vars+=(DISTTEST_TIMEOUT=120); fi
  env ${vars[@]+"${vars[@]}"} timeout -k 10 "$limit" "$(bin "$binary")" \
    --gtest_filter="$filter" --gtest_color=no ${fast[@]+"${fast[@]}"} >"$out" 2>&1
  local rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  local ran skipped failed why=()
  ran=$(grep -cE '^\[ +(OK|FAILED|SKIPPED) +\] .* \([0-9]+ ms\)$' "$out")
  skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$out")
  failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$out")
  if ((rc == 124 || rc == 137)); then
    if ((cut)); then
      why+=("cut after $limit s, at the end of the budget of $budget s (GPU_CHECK_BUDGET_S)")
    else
      why+=("killed by timeout after $limit s")
    fi
  fi
  if ((ran == 0)); then why+=("no test ran (exit $rc)"); fi
  local status
  if ((ran > 0 && skipped == ran)); then
    status=SKIP
    why+=("$(grep -A1 -E ': Skipped$' "$out" | grep -vE ': Skipped$|^--$' | sort -u | head -1)")
    if ((!optional)); then
      status=FAIL
      required_failed=1
      why=("every test skipped: ${why[*]}")
    fi
  else
    case $expect in
      pass | some)
        if ((rc != 0 || failed > 0)); then why+=("$failed failed (exit $rc)"); fi
        if ((skipped > 0)) && [[ $expect != some ]]; then why+=("$skipped of $ran skipped"); fi
        ;;
      fail)
        if ((rc == 0 || failed == 0)); then why+=("it passed: a failure was wanted"); fi
        ;;
    esac
    if ((ms > max * 1000)); then why+=("took $ms ms, more than ${max} s"); fi
    local phrase
    for phrase in "$@"; do
      if [[ $phrase == !* ]]; then
        ! grep -qF -- "${phrase#!}" "$out" || why+=("'${phrase#!}' in its output")
      else
        grep -qF -- "$phrase" "$out" || why+=("no '$phrase' in its output")
      fi
    done
    if ((${#why[@]} == 0)); then
      status=PASS
    elif ((cut && (rc == 124 || rc == 137))); then
      # Not a verdict on the case: the budget ended it.
      status=LEFT
      if ((!optional)); then required_left=1; fi
    elif ((optional)); then
      status=NOTE
    else
      status=FAIL
      required_failed=1
    fi
  fi
  local line
  line=$(printf '%-4s %-64s %7.1f s' "$status" "$label" "$(awk -v ms="$ms" 'BEGIN {print ms / 1000}')")
  if ((${#why[@]} > 0)); then
    local joined
    joined=$(printf '%s; ' "${why[@]}")
    line+="  (${joined%; })"
  fi
  results+=("$line")
  echo "$line"
  echo "$line" >>"$summary"
  {
    echo "=== $line"
    echo "=== ${fake_env:+$fake_env }${vars[*]-} $(bin "$binary") --gtest_filter='$filter' ${fast[*]-} (exit $rc, $ms ms)"
    cat "$out"
    echo
  } >>"$log"
  if [[ $status == FAIL || $status == NOTE ]]; then
    grep -E 'Failure$|^\[ disttest \]|^\[rank|failed|never completed|not in it' "$out" |
      head -12 | sed 's/^/       | /'
  fi
  rm -f "$out"
}

# The verdict cases: Gloo here (--cpu), NCCL on a GPU machine.
verdict_cases() {
  local sizes=$1 hang=$2 aborted=$3
  shift 3
  # The failure grace is 30 s: a rank 0 that its communicator does not stop
  # is killed then, too late, and says "still running".
  check "crash: rank 1 killed while rank 0 waits in a receive from it" fail 20 \
    gpu_check_child_ "GpuCheckPatient.RankThatDiesWhileAPeerReceives/2ranks" "$@" -- \
    "killed by signal 11 (SIGSEGV)" "rank 1 ended while this rank waited for it" \
    ${aborted:+"$aborted"} "!still running"
  # A peer that failed (not one that passed, whose data may still be
  # arriving) stops the wait at once.
  check "a failure: rank 1 fails and returns while rank 0 waits in a receive" fail 20 \
    gpu_check_child_ "GpuCheckPatient.RankThatFailsWhileAPeerReceives/2ranks" "$@" -- \
    "gpu-check: rank 1 fails on purpose" "!still running" "!passed its test and" \
    ${fake_dir:+"rank 1 ended while this rank waited for it in NCCL"}
  # On a split communicator no arena compares the calls first: the ranks
  # wait in NCCL itself, until its deadline (10 s test: 9 s).
  [[ $mode == cpu ]] || check "hang in NCCL itself (a split communicator), 2 ranks, ${hang} s timeout" fail \
    "$((hang + 30))" gpu_check_child_ "GpuCheckHang.HangInNcclItself/2ranks" \
    GPU_CHECK_HANG_TIMEOUT_S="$hang" "$@" -- \
    "timed out after" ${aborted:+"$aborted"} "never completed" "rank 1 is not in it"
  # On a GPU, NCCL's own error for the closed connection may come first;
  # the fake has none: there the harness's mark stops it.
  check "crash in NCCL itself (a split communicator): rank 0 stops" fail 20 \
    gpu_check_child_ "GpuCheckPatient.CrashInNcclItself/2ranks" "$@" -- \
    "killed by signal 11 (SIGSEGV)" "!still running" ${aborted:+"$aborted"} \
    ${fake_dir:+"rank 1 ended while this rank waited for it in NCCL"}
  check "pooled ranks: two tests in the same processes, 2 ranks" pass 60 \
    gpu_check_child_ "GpuCheckPooled.*" "$@"
  check "fault tolerance: survivors of an expected end go on, on their split" pass 60 \
    gpu_check_child_ "GpuCheck.SurvivorsOfAnExpectedEndGoOnWithoutIt/3ranks" "$@"
  # No false pass off the collectives: what NCCL runs without a word (it
  # has no tags and no types on the wire, and a small send returns with
  # nobody to receive it): the ledgers' balance of the messages fails them.
  # Gloo (--cpu) fails them its own ways, each named.
  local as_int32="received as recv(8 x int32 from rank 0, tag 0)"
  local world_p2p=$as_int32 split_p2p=$as_int32 nobody=${fake_dir:+"was never received: rank 1 made no receive for it"}
  if [[ $mode == cpu ]]; then
    world_p2p="rank 1 expected 8 x int32 with tag 0"
    split_p2p="does not pair"
  fi
  check "no false pass: 8 floats sent, received as 8 int32s, on the world" fail 30 \
    gpu_check_child_ "GpuCheck.SendAndReceiveThatDifferOnTheWorld/2ranks" "$@" -- \
    "$world_p2p"
  check "no false pass: 8 floats sent, received as 8 int32s, on a split" fail 30 \
    gpu_check_child_ "GpuCheck.SendAndReceiveThatDifferOnASplit/2ranks" "$@" -- \
    "$split_p2p"
  check "no false pass: an isend kept past the test, never waited for" fail 30 \
    gpu_check_child_ "GpuCheck.IsendNeverWaited/2ranks" "$@" -- \
    "isend(8 x float32 to rank 1, tag 0) on world made here was never waited for"
  # A GPU's NCCL waits for a receiver (the wait's 2 s timeout then ends
  # it); Gloo too; the fake GPU's send returns at once, unreceived.
  check "no false pass: an isend dropped without wait(), never received" fail 30 \
    gpu_check_child_ "GpuCheck.IsendDroppedWithoutWait/2ranks" "$@" -- \
    "isend(8 x float32 to rank 1, tag 0)" ${nobody:+"$nobody"}
  check "no false pass: floats that differ in the last bit (DIST_EXPECT_ALL_EQ)" fail 30 \
    gpu_check_child_ "GpuCheck.AllEqInTheLastBit/2ranks" "$@" -- \
    "DIST_EXPECT_ALL_EQ(x): the 2 ranks disagree" "1.0000001: rank 1" \
    'DIST_EXPECT_ALL_EQ_ON(x): the 2 ranks of communicator "world split 0 (color 0)" disagree'
  local n
  for n in $sizes; do
    local last=$((n - 1))
    check "mismatch: counts that differ, ${n} ranks" fail 60 gpu_check_child_ \
      "GpuCheck.CallsThatDiffer/${n}ranks" "$@" -- \
      "collective #1 does not match across the $n ranks" \
      "rank $last: allreduce(8 x float32, sum)"
    check "mismatch on a split communicator (sum and max), ${n} ranks" fail 60 \
      gpu_check_child_ "GpuCheck.SplitCallsThatDiffer/${n}ranks" "$@" -- \
      "collective #0 on world split 0 (color 0) did not match" \
      "rank $last called allreduce(8 x float32, max)"
    check "crash: rank $last killed in a collective, ${n} ranks" fail 60 gpu_check_child_ \
      "GpuCheck.RankThatCrashesInACollective/${n}ranks" "$@" -- \
      "killed by signal 11 (SIGSEGV)" \
      "collective #2 on the world communicator never completed"
    check "hang: rank $last never joins, ${n} ranks, ${hang} s timeout" fail \
      "$((hang + 30))" gpu_check_child_ "GpuCheckHang.HangInACollective/${n}ranks" \
      GPU_CHECK_HANG_TIMEOUT_S="$hang" "$@" -- \
      "collective #2 on the world communicator never completed" \
      "rank $last is not in it" "timed out after"
  done
}

if [[ $mode == cpu ]]; then
  echo "== the GPU check's cases on Gloo (no GPU): the script judges them"
  check "collectives of 0 to 2^22 elements, 2 ranks" pass 120 gpu_check_child_ \
    "GpuCheck.CollectivesAtEverySize/2ranks" GPU_CHECK_BACKEND=gloo
  verdict_cases 2 4 "" GPU_CHECK_BACKEND=gloo
else
  echo "== GPUs"
  uuids=
  if [[ -n $fake_dir ]]; then
    uuids=GPU-66616b65-0000-0000-0000-000000000001
    echo "the fake GPU of $fake_lib: $uuids (NCCL and CUDA on host memory;" \
      "this proves the harness, not NCCL)"
  elif command -v nvidia-smi >/dev/null; then
    nvidia-smi -L || true
    uuids=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | paste -sd, -)
  else
    echo "nvidia-smi not found"
  fi
  if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
    echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
  fi
  nccl_lib=$(ldd "$(bin gpu_check_child_)" | awk '/libnccl/ {print $3}')
  nccl_version=
  if [[ -z $fake_dir && -n $nccl_lib ]]; then
    # ncclGetVersion: 22809 is 2.28.9 (NCCL 2.30 and later share a GPU
    # their own way: NCCL_MULTI_RANK_GPU_ENABLE; before, a host id a rank).
    nccl_version=$(python3 -c 'import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print(v.value)' "$nccl_lib" 2>/dev/null)
  fi
  echo "NCCL: ${nccl_lib:-none linked}${nccl_version:+ (ncclGetVersion: $nccl_version)}"
  if [[ -z $fake_dir ]] && command -v nvidia-smi >/dev/null; then
    # A GPU in Exclusive_Process mode takes one process: ranks cannot share it.
    nvidia-smi --query-gpu=name,driver_version,compute_mode,persistence_mode,memory.total \
      --format=csv 2>/dev/null || true
  fi
  env | grep -E '^NCCL_' | sed 's/^/already set: /' || true
  [[ ! -f /etc/nccl.conf ]] || echo "/etc/nccl.conf: $(tr '\n' ' ' </etc/nccl.conf)"
  if [[ -z $fake_dir ]]; then
    # NCCL's warnings in each case's output (disttest removes NCCL_DEBUG
    # from ranks unless told to keep it): the log says why NCCL failed.
    export DISTTEST_KEEP_NCCL_DEBUG=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  fi
  echo "budget: ${budget} s (GPU_CHECK_BUDGET_S)"
  count=$(awk -F, '{print NF}' <<<"$uuids")
  count=${count:-0}
  indices=$(seq -s, 0 $((count - 1)) 2>/dev/null),
  share=(DISTTEST_SHARE_GPUS=1)
  # The fake GPU is listed by DISTTEST_GPUS (the cases that set it keep theirs).
  if [[ -n $fake_dir ]]; then share+=(DISTTEST_GPUS=1); fi

  echo "== the NCCL example: every collective, on one GPU or more"
  for n in 1 2 4; do
    check "example, ${n} ranks" pass 120 nccl_allreduce_test "Nccl.*/${n}ranks" "${share[@]}"
  done
  echo "== a mismatch, a crash and a hang in an NCCL collective"
  # The hangs' timeout: 10 s on a GPU; the fake's ranks start at once.
  verdict_cases "2 4" "$( [[ -n $fake_dir ]] && echo 3 || echo 10)" \
    "the nccl communicator is aborted" "${share[@]}"

  echo "== collectives of 0 to 2^22 elements against a serial reference"
  check "collectives of 0 to 2^22 elements, 1, 2 and 4 ranks" pass 180 gpu_check_child_ \
    "$(printf 'GpuCheck.CollectivesAtEverySize/%sranks:' 1 2 4)" "${share[@]}"
  check "inputs that overlap their outputs (device buffers), 2 and 4 ranks" pass 120 \
    gpu_check_child_ "GpuCheck.OverlappingBuffers/*" "${share[@]}"
  echo "== which GPU each rank sees"
  if ((count > 0)); then
    check "by index (DISTTEST_GPUS=$indices), 1, 2 and 4 ranks" pass 120 gpu_check_child_ \
      "GpuCheck.OwnsItsGpu/*" DISTTEST_SHARE_GPUS=1 DISTTEST_GPUS="$indices" \
      GPU_CHECK_UUIDS="$uuids"
    check "by UUID (DISTTEST_GPUS=<the UUIDs>), 1, 2 and 4 ranks" pass 120 gpu_check_child_ \
      "GpuCheck.OwnsItsGpu/*" DISTTEST_SHARE_GPUS=1 DISTTEST_GPUS="$uuids" \
      GPU_CHECK_UUIDS="$uuids"
    [[ -n $fake_dir ]] || check "from NVML (nothing set), 1, 2 and 4 ranks" pass 120 \
      gpu_check_child_ "GpuCheck.OwnsItsGpu/*" -u CUDA_VISIBLE_DEVICES "${share[@]}" \
      GPU_CHECK_UUIDS="$uuids"
  fi
  check "no GPU (CUDA_VISIBLE_DEVICES empty): kAuto takes Gloo" pass 60 gpu_check_child_ \
    "GpuCheckAuto.WithoutAGpuSeesNone/*" CUDA_VISIBLE_DEVICES=

  echo "== rank threads"
  check "example in rank threads (processes where NCCL needs a host id)" pass 120 \
    nccl_allreduce_test \
    "Nccl.*/1ranks:Nccl.*/2ranks" "${share[@]}" DISTTEST_LAUNCH=threads
  if [[ -n $fake_dir ]]; then
    # What one fake GPU of an NCCL before 2.30 does not reach: rank threads
    # on GPUs of their own, and NCCL 2.30's way to share one (threads can
    # then).
    check "example in rank threads on 2 GPUs (a GPU each), 1 and 2 ranks" pass 120 \
      nccl_allreduce_test "Nccl.*/1ranks:Nccl.*/2ranks" DISTTEST_LAUNCH=threads \
      DISTTEST_FAKE_GPUS=2 DISTTEST_GPUS=2 -- "!ranks share the GPUs"
    check "example as NCCL 2.30 (NCCL_MULTI_RANK_GPU_ENABLE), 2 and 4 ranks" pass 120 \
      nccl_allreduce_test "Nccl.*/2ranks:Nccl.*/4ranks" "${share[@]}" \
      DISTTEST_FAKE_NCCL_VERSION=23000 -- "up to 4 a GPU: NCCL_MULTI_RANK_GPU_ENABLE=1"
    check "example in rank threads as NCCL 2.30, 2 and 8 ranks on 3 GPUs" pass 120 \
      nccl_allreduce_test "Nccl.*/2ranks:Nccl.*/8ranks" "${share[@]}" DISTTEST_LAUNCH=threads \
      DISTTEST_FAKE_NCCL_VERSION=23000 DISTTEST_FAKE_GPUS=3 DISTTEST_GPUS=3 -- \
      "8 ranks share the GPUs, up to 3 a GPU: NCCL_MULTI_RANK_GPU_ENABLE=1" \
      "!as processes, not threads"
    threads_on_4=(DISTTEST_LAUNCH=threads DISTTEST_FAKE_GPUS=4 DISTTEST_GPUS=4)
    check "rank threads on 4 GPUs: counts that differ, 4 ranks" fail 60 gpu_check_child_ \
      "GpuCheck.CallsThatDiffer/4ranks" "${threads_on_4[@]}" -- \
      "collective #1 does not match across the 4 ranks" "the nccl communicator is aborted"
    # Under a launcher the ranks' ledgers come to rank 0 as text: the
    # messages' balance with them.
    if command -v mpiexec >/dev/null; then
      check "under mpiexec on 2 GPUs: 8 floats sent, received as 8 int32s" fail 60 \
        gpu_check_child_ "GpuCheck.SendAndReceiveThatDifferOnTheWorld/2ranks" \
        DISTTEST_LAUNCH=mpiexec DISTTEST_FAKE_GPUS=2 DISTTEST_GPUS=2 -- \
        "received as recv(8 x int32 from rank 0, tag 0)"
    fi
    check "rank threads on 4 GPUs: a hang in NCCL itself, 2 ranks, 3 s timeout" fail 40 \
      gpu_check_child_ "GpuCheckHang.HangInNcclItself/2ranks" "${threads_on_4[@]}" \
      GPU_CHECK_HANG_TIMEOUT_S=3 -- "timed out after" "rank 1 is not in it" \
      "the nccl communicator is aborted"
  fi

  echo "== communicator creation and the cookbook's kAuto recipe"
  check "create_test (its no-GPU cases skip)" some 120 create_test \
    "CreateCommunicatorTest.*:NcclCommunicatorTest.*" ${fake_dir:+DISTTEST_GPUS=1}
  check "cookbook AnyDevice (NCCL where the GPUs are shared)" some 120 cookbook_test \
    "AnyDevice.*" "${share[@]}"
  echo "== beyond NCCL's two ranks a GPU: 8 ranks (reported, not required)"
  check "example, 8 ranks (beyond NCCL's two a GPU)" 'pass?' 180 nccl_allreduce_test \
    "Nccl.*/8ranks" "${share[@]}"
  check "collectives of 0 to 2^22 elements, 8 ranks" 'pass?' 180 gpu_check_child_ "GpuCheck.CollectivesAtEverySize/8ranks" "${share[@]}"

fi

echo
echo "== summary"
totals=
for status in PASS FAIL SKIP NOTE LEFT; do
  totals+=$(printf '%s %d  ' "$status" "$(printf '%s\n' "${results[@]}" | grep -c "^$status")")
done
totals+="in $(($(date +%s) - started)) s"
printf '%s\n' "${results[@]}" "$totals" | tee "$summary"
if [[ $mode != cpu ]]; then echo "(full output: $log)"; fi
if ((required_failed)); then exit 1; fi
if ((required_left)); then
  echo "gpu-check.sh: required cases were not run (LEFT): the budget was spent" >&2
  exit 1
fi
if [[ $mode != cpu ]] && ((count == 0)); then
  echo "gpu-check.sh: nvidia-smi lists no GPU: the NCCL cases skipped, nothing is proven" >&2
  exit 1
fi
exit 0
