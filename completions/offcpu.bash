# bash completion for offcpu
_offcpu() {
  local cur prev words cword
  _init_completion || return
  local sub=""
  for w in "${words[@]:1:cword-1}"; do
    case $w in rwsem|lock|flamegraph) sub=$w; break ;; esac
  done
  case $prev in
    -p|--pid)
      COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur")); return ;;
    -t|--tid|--title|--width|--minwidth|--countname|-m|-M|--min-block-time|--max-block-time|--min-wait|-i|--interval|--stack-storage-size|--perf-max-stack-depth|--max-entries|--unwind-memory|--name-time|--top-waits|--events-min|--events-memory|--chain-depth)
      return ;;
    --state)
      COMPREPLY=($(compgen -W "R S D I T D,S" -- "$cur")); return ;;
    --by)
      COMPREPLY=($(compgen -W "lock caller thread cgroup" -- "$cur")); return ;;
    -Y|--kinds)
      COMPREPLY=($(compgen -W "mutex rwsem rwsem:read rwsem:write semaphore rtmutex percpu-rwsem rwlock-rt mutex:spin spinlock rwlock futex futex:pi" -- "$cur")); return ;;
    -n|--name)
      COMPREPLY=($(compgen -W "$(cat /proc/[0-9]*/comm 2>/dev/null | sort -u)" -- "$cur")); return ;;
    --user)
      COMPREPLY=($(compgen -u -- "$cur")); return ;;
    --group)
      COMPREPLY=($(compgen -g -- "$cur")); return ;;
    --cgroup)
      local root=/sys/fs/cgroup
      [[ -e /sys/fs/cgroup/unified/cgroup.procs ]] && root=/sys/fs/cgroup/unified
      COMPREPLY=($(cd "$root" 2>/dev/null && compgen -d -- "${cur#/}")); return ;;
    --user-unwind)
      COMPREPLY=($(compgen -W "auto fp" -- "$cur")); return ;;
    --format)
      if [[ $sub == flamegraph ]]; then
        COMPREPLY=($(compgen -W "svg folded pprof" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "text folded svg pprof" -- "$cur"))
      fi
      return ;;
    -o|--output)
      _filedir; return ;;
    --debug-dir)
      _filedir -d; return ;;
    --loader)
      COMPREPLY=($(compgen -W "auto light libbpf" -- "$cur")); return ;;
    --kernel-unwind)
      COMPREPLY=($(compgen -W "auto orc switch-out" -- "$cur")); return ;;
    --attach)
      COMPREPLY=($(compgen -W "auto tp_btf raw_tp fentry kprobe tracepoint" -- "$cur")); return ;;
  esac
  local files="-o --output --title --width --minwidth -h --help"
  local tracing="$files --format -f --folded -d --delimited --per-pid --per-thread --no-symbolize --no-inline --no-python --lines --debuginfod-time --debug-dir -v --verbose --stack-storage-size --perf-max-stack-depth --max-entries"
  case $sub in
    rwsem)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$tracing -p --pid --thread-name --read -i --interval -m --min-wait --wakers" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$(cat /proc/[0-9]*/comm 2>/dev/null | sort -u)" -- "$cur"))
      fi ;;
    lock)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$tracing -p --pid -t --tid -n --name --thread-name --children --cgroup --user --group --keep-fds -u --user-threads-only -k --kernel-threads-only -m --min-block-time -M --max-block-time -Y --kinds --spin --futex --by -i --interval --holders --wakers" -- "$cur"))
      fi ;;
    flamegraph)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$files --format --countname" -- "$cur"))
      else
        _filedir
      fi ;;
    *)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$tracing -p --pid -t --tid -u --user-threads-only -k --kernel-threads-only -m --min-block-time -M --max-block-time --state -U --user-stacks-only -K --kernel-stacks-only -q --quiet -V --version --kernel-unwind --verify-kernel-unwind --verify-stack-reuse --time-walks --no-stack-reuse --loader -n --name --children --cgroup --per-cgroup --user --group --keep-fds --wakers --runqueue --show-state --user-unwind --unwind-memory --name-time --top-waits --events-min --events-memory --chain-depth" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "rwsem lock flamegraph" -- "$cur"))
      fi ;;
  esac
}
complete -F _offcpu offcpu
