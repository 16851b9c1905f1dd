# The routes and `launch.py check` of a real run, as a user would type them: /healthz, /readyz and check
# while loading, when ready, one chat, /metrics, then Ctrl-C and check again.
#   bash bench/routes_transcript.sh MODEL_DIR [PORT]     (MODEL_DIR: e.g. python tests/tiny_model.py /tmp/tiny)
set -u
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bash bench/routes_transcript.sh MODEL_DIR [PORT]}
P=${2:-8012}
LOG=$(mktemp -d)
export VLLM_HOST_IP=127.0.0.1
.venv/bin/python launch.py --model "$MODEL" --port $P --log-file $LOG/llm.log > $LOG/stdout.txt 2>&1 &
APP=$!
run() { echo "\$ $*"; eval "$@"; echo "(exit $?)"; }
until curl -s -o /dev/null localhost:$P/healthz; do sleep 0.2; done
run "curl -s -w ' HTTP %{http_code}\n' localhost:$P/healthz"
run "curl -s -w ' HTTP %{http_code}\n' localhost:$P/readyz"
run ".venv/bin/python launch.py check --port $P"
until curl -sf -o /dev/null localhost:$P/readyz; do sleep 0.5; done
run "curl -s -w ' HTTP %{http_code}\n' localhost:$P/readyz"
run ".venv/bin/python launch.py check --port $P"
echo "# one chat through /v1, then the metrics"
curl -s localhost:$P/v1/chat/completions -H 'content-type: application/json' -d '{"messages":[{"role":"user","content":"你好"}],"max_tokens":32}' | head -c 300; echo
run "curl -s localhost:$P/metrics | grep -E '^(vllm:num_requests_running|vllm:generation_tokens_total|vllm:request_success_total|ernie_chat_chats_total|ernie_chat_messages_total|ernie_chat_generated_tokens_total|ernie_chat_active_requests|ernie_chat_queued_requests|ernie_chat_engine_restarts_total|ernie_chat_engine_state|ernie_chat_time_to_first_token_seconds_count|ernie_chat_decode_tokens_per_second_count)'"
run "curl -s localhost:$P/metrics | grep -c '^vllm:'"
kill -INT $APP; wait $APP; echo "(app exit $?)"
run ".venv/bin/python launch.py check --port $P"
