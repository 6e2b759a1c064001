# kai scheduler image: `kai run` on a slim Python, as a non-root user, fine with a read-only root.
# Build: docker build -t kai-scheduler:0.1.0 .
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
COPY kai ./kai
RUN python -m venv /opt/kai \
 && /opt/kai/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/kai/bin/pip install --no-cache-dir .

FROM python:3.11.11-slim-bookworm
COPY --from=build /opt/kai /opt/kai
# Bytecode is compiled at install time; nothing is written at run time (read-only root works).
ENV PATH=/opt/kai/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 kai && useradd --system --uid 10001 --gid kai --no-create-home kai
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["kai"]
CMD ["run", "--metrics-port=8080"]
