# The benchmark's jobs for Ruby Sidekiq, the twin of bench/jobside.py and
# bench/benchapp/jobs.py (same class names, same workloads, same completion probe).
#
#   REDIS_URL=... BENCH_REDIS_URL=... sidekiq -r ./bench/ruby/jobs.rb -c 10 -q default
#
# Several processes can run it at once (the sidekiq-x2 system): each keys its counts by its
# own pid, and the driver takes the earliest first start and the latest last end over them.
require "sidekiq"
require "redis"

# Sidekiq 6.4.1 fetches with `brpop(*queues, timeout)`, a positional timeout that redis-rb
# 4.8 (Debian's ruby-redis) deprecates: without this, every fetch, so every job, builds a
# two-line warning with a caller lookup and writes it to stderr. Sidekiq 6.5 passes the
# keyword; silenced here so the bench measures Sidekiq, not a version mismatch's warnings.
Redis.silence_deprecations = true

# BENCH_SIDEKIQ_DRIVER=hiredis: redis-rb's hiredis driver (Debian's ruby-hiredis), Sidekiq
# 6.x's fastest configuration. 7.x and 8.0 talk through redis-client and its Ruby driver.
if ENV["BENCH_SIDEKIQ_DRIVER"] == "hiredis"
  redis = { url: ENV.fetch("REDIS_URL"), driver: :hiredis }
  Sidekiq.configure_server { |config| config.redis = redis }
  Sidekiq.configure_client { |config| config.redis = redis }
end

# No per-job lines (as runwurk -v 0), unless the run is one of the logging variants
# (bench/systems/sidekiq.py), which keep Sidekiq's default INFO: a start and a done line per job.
Sidekiq.logger.level = Logger::WARN unless ENV["BENCH_SIDEKIQ_LOG"] == "1"

module BenchProbe
  CPU_ITERATIONS = 10_000
  IO_SECONDS = 0.005
  FLUSH_INTERVAL = 0.01

  @lock = Mutex.new
  @pid = nil
  @done = 0
  @flushed = 0
  @first = 0.0
  @last = 0.0

  class << self
    def cpu
      x = 0
      CPU_ITERATIONS.times { |i| x += i * i % 7 }
      x
    end

    def io
      sleep IO_SECONDS
    end

    def begin_job
      return if @pid == Process.pid

      @lock.synchronize do
        next if @pid == Process.pid

        @done = @flushed = 0
        @first = Time.now.to_f
        @pid = Process.pid
        Thread.new { flusher }
      end
    end

    def end_job
      now = Time.now.to_f
      @lock.synchronize do
        @done += 1
        @last = now
      end
    end

    def record_latency(enqueued_at)
      latency = Time.now.to_f - enqueued_at
      redis.rpush("bench:lat", latency)
    end

    def redis
      @redis ||= Redis.new(url: ENV.fetch("BENCH_REDIS_URL"))
    end

    private

    def flusher
      r = Redis.new(url: ENV.fetch("BENCH_REDIS_URL"))
      pid = Process.pid
      r.multi do |m|
        m.sadd("bench:pids", pid)
        m.set("bench:first:#{pid}", @first.to_s)
      end
      loop do
        sleep FLUSH_INTERVAL
        done, last = @lock.synchronize { [@done, @last] }
        next if done == @flushed

        r.multi do |m|
          m.set("bench:last:#{pid}", last.to_s)
          m.incrby("bench:done", done - @flushed)
        end
        @flushed = done
      end
    end
  end
end

class NoopJob
  include Sidekiq::Worker

  def perform(*)
    BenchProbe.begin_job
    BenchProbe.end_job
  end
end

class CpuJob
  include Sidekiq::Worker

  def perform(*)
    BenchProbe.begin_job
    BenchProbe.cpu
    BenchProbe.end_job
  end
end

class IoJob
  include Sidekiq::Worker

  def perform(*)
    BenchProbe.begin_job
    BenchProbe.io
    BenchProbe.end_job
  end
end

class LatJob
  include Sidekiq::Worker

  def perform(enqueued_at)
    BenchProbe.begin_job
    BenchProbe.record_latency(enqueued_at)
    BenchProbe.end_job
  end
end
