# bash completion for offcpu
_offcpu() {
  local cur prev words cword
  _init_completion || return
  local common="-o --output --format --title --width --minwidth -d --delimited -f --folded -h --help"
  case $prev in
    -p|--pid)
      COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur")); return ;;
    -t|--tid) return ;;
    --format)
      COMPREPLY=($(compgen -W "text folded svg pprof" -- "$cur")); return ;;
    -o|--output)
      _filedir; return ;;
    --loader)
      COMPREPLY=($(compgen -W "auto light libbpf" -- "$cur")); return ;;
    --kernel-unwind)
      COMPREPLY=($(compgen -W "auto orc switch-out" -- "$cur")); return ;;
    --attach)
      COMPREPLY=($(compgen -W "auto tp_btf raw_tp fentry kprobe tracepoint" -- "$cur")); return ;;
  esac
  local sub=""
  for w in "${words[@]:1:cword-1}"; do
    case $w in rwsem|flamegraph) sub=$w; break ;; esac
  done
  case $sub in
    rwsem)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$common -p --pid --thread-name --read -i --interval -m --min-wait -v --verbose --stack-storage-size --perf-max-stack-depth --max-entries" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$(cat /proc/[0-9]*/comm 2>/dev/null | sort -u)" -- "$cur"))
      fi ;;
    flamegraph)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "-o --output --title --width --minwidth --countname -h --help" -- "$cur"))
      else
        _filedir
      fi ;;
    *)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$common -p --pid -t --tid -u --user-threads-only -k --kernel-threads-only -m --min-block-time -M --max-block-time --state -U --user-stacks-only -K --kernel-stacks-only -q --quiet -v --verbose -V --version --stack-storage-size --perf-max-stack-depth --max-entries --kernel-unwind --verify-kernel-unwind --loader" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "rwsem flamegraph" -- "$cur"))
      fi ;;
  esac
}
complete -F _offcpu offcpu
