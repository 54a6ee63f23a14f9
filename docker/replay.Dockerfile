# cellcast — the Kafka producer of the compose stack: replays CSV sample data as KPI
# messages with kcat (docker/replay.sh). Its own file because the classic builder builds
# every stage of a Dockerfile, and cellcastd's image does not need this one.
#
#   docker build -f docker/replay.Dockerfile -t cellcast-replay .   (from the repository root)

ARG DEBIAN=debian:12-slim
FROM ${DEBIAN}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends kcat gawk \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10002 --no-create-home --shell /usr/sbin/nologin replay
COPY docker/replay.sh /usr/local/bin/replay.sh
USER replay
# Run by bash, so the script's mode in the context (a checkout without +x) does not matter.
ENTRYPOINT ["bash", "/usr/local/bin/replay.sh"]
