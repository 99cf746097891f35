# bash completion for wstore(1) -*- shell-script -*-
# Commands, subcommands, options, config keys; checkpoint ids come from
# `wstore model list --json` of the store the line names (or the default),
# and so do model ids (model resolve, model list --model).

# _wstore_ids [FIELD]: checkpoint_id (default) or model_id of every
# checkpoint listed
_wstore_ids()
{
    local store=() i field=${1:-checkpoint_id}
    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
        case ${COMP_WORDS[i]} in
        --store) store=(--store "${COMP_WORDS[i + 1]}") ;;
        --store=*) store=("${COMP_WORDS[i]}") ;;
        esac
    done
    wstore "${store[@]}" --json model list 2>/dev/null |
        sed -n "s/^ *\"$field\": \"\(.*\)\",\{0,1\}$/\1/p" | sort -u
}

_wstore()
{
    local cur prev words cword
    _init_completion || return

    local globals="--store --config --json --quiet --verbose --help
        --master-server-addr --metadata-server --protocol --rdma-devices
        --local-hostname --redis-tls-ca-file --redis-tls-cert-file
        --redis-tls-key-file"
    local keys="store master_server_addr metadata_server protocol
        rdma_devices local_hostname replica_num redis_password
        redis_tls_ca_file redis_tls_cert_file redis_tls_key_file key_prefix
        connect_timeout_ms command_timeout_ms mooncake_library mooncake_log
        serve_listen serve_token serve_tls_cert serve_tls_key
        serve_tls_key_password_file serve_upstream_refresh quota evict
        chunk_size hub_endpoint hub_token_file hub_tls_ca_file hub_max_files
        hub_max_pages hub_max_file_size hub_max_total_size hub_max_json_size
        hub_max_redirects hub_min_rate hub_transfer_timeout_ms"

    case $prev in
    --store | --master-server-addr | --metadata-server | --protocol | \
        --rdma-devices | --local-hostname | --listen | --token | \
        --checkpoint-id | --model-id | --revision | --chunk-size | \
        --replica-num | --jobs | --cache-size | --grace | --evict-to | \
        --max-connections | --drain | --refresh | --threads | --include | \
        --exclude | --path | --from-hub | --endpoint | \
        --retries | --stall-timeout | --upstream | --upstream-allow | \
        --cache-seconds | --header-timeout | --max-connections-per-client)
        return ;;
    --checkpoint)
        COMPREPLY=($(compgen -W "$(_wstore_ids)" -- "$cur"))
        return ;;
    --reflink)
        COMPREPLY=($(compgen -W "auto always never" -- "$cur"))
        return ;;
    --model)
        COMPREPLY=($(compgen -W "$(_wstore_ids model_id)" -- "$cur"))
        return ;;
    --config | --output | --tls-cert | --tls-key | --tls-key-password-file | \
    --token-file | --upstream-token-file | --log-file | --redis-tls-ca-file | \
    --redis-tls-cert-file | --redis-tls-key-file)
        _filedir
        return ;;
    --source | --dest)
        _filedir -d
        return ;;
    esac

    # the command words so far, global options and their values left out
    local cmd=() i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --store | --config | --master-server-addr | --metadata-server | \
            --protocol | --rdma-devices | --local-hostname | \
            --redis-tls-ca-file | --redis-tls-cert-file | --redis-tls-key-file)
            ((i++)) ;;
        -*) ;;
        *) cmd+=("${words[i]}") ;;
        esac
    done

    if [[ $cur == -* ]]; then
        local opts=""
        case "${cmd[*]}" in
        "model import"*) opts="--checkpoint-id --model-id --source --revision --chunk-size --replica-num --jobs --reflink --from-hub --bundle --endpoint --token-file --retries --stall-timeout --include --exclude --force" ;;
        "model list"* | "model ls"*) opts="--model --all" ;;
        "model inspect"*) opts="--tensors" ;;
        "model verify"*) opts="--jobs" ;;
        "model delete"* | "model rm"*) opts="--missing-ok --wait --force" ;;
        "model materialize-file"*) opts="--path --output" ;;
        "model pull"*) opts="--dest --include --exclude --jobs --no-verify --force" ;;
        "model export"*) opts="--output" ;;
        "model copy"*) opts="--to --reflink" ;;
        "mount"*) opts="--checkpoint --cache-size --foreground --direct-io --page-cache --refresh --threads --allow-other --log-file" ;;
        "serve"*) opts="--listen --token --max-connections --max-connections-per-client --drain --header-timeout --cache-seconds --no-access-log --mmap --tls-cert --tls-key --tls-key-password-file --upstream --upstream-allow --upstream-token-file --upstream-refresh" ;;
        "gc"* | "admin gc"*) opts="--dry-run --grace --evict-to" ;;
        "admin unlock"*) opts="--force" ;;
        "admin migrate"*) opts="--dry-run --verify" ;;
        "config init"*) opts="--force" ;;
        "config show"*) opts="--origin" ;;
        "config set"* | "config unset"*) opts="--system" ;;
        esac
        COMPREPLY=($(compgen -W "$opts $globals --version" -- "$cur"))
        return
    fi

    case ${#cmd[@]} in
    0)
        COMPREPLY=($(compgen -W "model df config mount umount serve gc admin version help" -- "$cur"))
        return ;;
    1)
        case ${cmd[0]} in
        model) COMPREPLY=($(compgen -W "import list ls resolve inspect verify delete rm materialize-file pull export copy pin unpin" -- "$cur")) ;;
        config) COMPREPLY=($(compgen -W "init show get set unset" -- "$cur")) ;;
        admin) COMPREPLY=($(compgen -W "gc unlock migrate" -- "$cur")) ;;
        mount | umount) _filedir -d ;;
        esac
        return ;;
    2)
        case "${cmd[*]}" in
        "model inspect" | "model verify" | "model delete" | "model rm" | \
            "model materialize-file" | "model pull" | "model pin" | \
            "model export" | "model copy" | \
            "model unpin" | "admin unlock")
            COMPREPLY=($(compgen -W "$(_wstore_ids)" -- "$cur")) ;;
        "model resolve")
            COMPREPLY=($(compgen -W "$(_wstore_ids model_id)" -- "$cur")) ;;
        "config get" | "config set" | "config unset")
            COMPREPLY=($(compgen -W "$keys" -- "$cur")) ;;
        esac
        return ;;
    *)
        # commands taking several ids
        case "${cmd[0]} ${cmd[1]}" in
        "model delete" | "model rm" | "model pin" | "model unpin")
            COMPREPLY=($(compgen -W "$(_wstore_ids)" -- "$cur")) ;;
        esac
        return ;;
    esac
} &&
    complete -F _wstore wstore
