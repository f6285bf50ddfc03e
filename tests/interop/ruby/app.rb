# Loaded by `sidekiq -r` (the Ruby worker) and by client.rb: job classes shared with the
# Python side. Each job records what it received in the Redis list "ruby:seen" so a test
# can compare it with what Python pushed.
require "json"
require "sidekiq"

module Interop
  def self.record(klass, jid, args, extra = {})
    Sidekiq.redis do |conn|
      conn.rpush("ruby:seen", JSON.generate({"class" => klass, "jid" => jid, "args" => args}.merge(extra)))
    end
  end

  # Runs whatever Python pushes under the wire name "Interop::Echo".
  class Echo
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"

    def perform(*args)
      Interop.record(self.class.name, jid, args)
    end
  end

  # Always fails, so its retry entries can be handed to the Python worker.
  class Fail
    include Sidekiq::Worker
    sidekiq_options queue: "ruby", retry: 3, backtrace: true

    def perform(*args)
      raise ArgumentError, "ruby boom #{args.inspect}"
    end
  end

  class Slow
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"

    def perform(seconds)
      Interop.record(self.class.name, jid, [seconds], "phase" => "start")
      sleep seconds
      Interop.record(self.class.name, jid, [seconds], "phase" => "done")
    end
  end
end

begin
  require "active_job"
  # Sidekiq 7 ships its own ActiveJob adapter (shadowing Rails 6.1's), whose wrapper class is in
  # sidekiq/rails. Sidekiq 8's needs ActiveJob 7.0+ (Debian 12 has 6.1): no ActiveJob there.
  if Sidekiq::VERSION.start_with?("7.")
    require "sidekiq/rails"
  elsif !Sidekiq::VERSION.start_with?("6.")
    raise LoadError, "Sidekiq #{Sidekiq::VERSION}'s ActiveJob adapter needs ActiveJob >= 7.0, this is #{ActiveJob.version}"
  end
  ActiveJob::Base.queue_adapter = :sidekiq
  ActiveJob::Base.logger = Logger.new(nil)

  # The Rails side of the ActiveJob checks: Python enqueues it in Rails' wrapper shape.
  class HelloJob < ActiveJob::Base
    queue_as :mailers

    def perform(*args)
      Interop.record(self.class.name, job_id, args)
    end
  end
rescue LoadError
  # ActiveJob is optional for everything but the ActiveJob checks, which say so.
end

# client.rb reads Sidekiq::RetrySet, DeadSet, ProcessSet, Workers, Stats: load the API.
require "sidekiq/api"

# --- Wire-format checks (tests/interop/test_python_to_ruby.py, test_timestamps.py) ---------
module Interop
  # Like Echo, and also records when it ran, so a scheduled job can be checked against its due time.
  class Stamp
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"

    def perform(*args)
      Interop.record(self.class.name, jid, args, "ran_at" => Time.now.to_f)
    end
  end
end

# SIDEKIQ_POLL=<seconds> pins the scheduled/retry poll interval (the default is a random 5-15 s,
# too slow for tests). It also drops the fixed 10 s boot wait; a random 0-5 s one remains.
# Sidekiq 6.x keeps its options in a Hash (config.options), 7.x and 8.x in Sidekiq::Config (config[]).
Sidekiq.configure_server do |config|
  if ENV["SIDEKIQ_POLL"]
    options = config.respond_to?(:options) ? config.options : config
    options[:poll_interval_average] = ENV["SIDEKIQ_POLL"].to_f
  end
end

# --- Sidekiq 7+: capsules and iterable jobs (tests/interop/test_fleet.py) ------------------------
# SIDEKIQ_CAPSULE=<name>:<concurrency>:<queue> adds a capsule beside the default one, as a Rails
# app does with config.capsule(name); the process hash then lists both under "capsules".
if Sidekiq.respond_to?(:default_configuration) && ENV["SIDEKIQ_CAPSULE"]
  Sidekiq.configure_server do |config|
    name, concurrency, queue = ENV["SIDEKIQ_CAPSULE"].split(":")
    config.capsule(name) do |cap|
      cap.concurrency = concurrency.to_i
      cap.queues = [queue]
    end
  end
end

begin
  require "sidekiq/iterable_job" # Sidekiq 7.3+
rescue LoadError
  # 6.x has no iterable jobs.
end

if defined?(Sidekiq::IterableJob)
  module Interop
    # Iterates over its argument's items, recording each; resumes from the cursor in it-<jid>.
    class Iterate
      include Sidekiq::IterableJob
      sidekiq_options queue: "ruby"

      def build_enumerator(items, cursor:)
        array_enumerator(items, cursor: cursor)
      end

      def each_iteration(item, _items)
        Interop.record(self.class.name, jid, [item])
      end
    end
  end
end

# --- Keyword arguments (tests/interop/test_keywords.py) ---------------------------------------
# Python sends a job's keyword arguments under the payload key "kwargs". Sidekiq itself ignores
# the key (perform gets the positional args) and keeps it through retries; a Ruby app that wants
# the keywords reads them in a server middleware, as here.
module Interop
  class ReadKeywords
    def call(worker, job, _queue)
      worker.kwargs = job["kwargs"] || {} if worker.respond_to?(:kwargs=)
      yield
    end
  end

  class Keywords
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"
    attr_accessor :kwargs

    def perform(*args)
      Interop.record(self.class.name, jid, args, "kwargs" => kwargs)
    end
  end
end

Sidekiq.configure_server do |config|
  config.server_middleware { |chain| chain.add Interop::ReadKeywords }
end

# SIDEKIQ_BEAT=<seconds> shortens the heartbeat (Launcher::BEAT_PAUSE, 10 s in 7.x/8.0, 5 s in
# 6.4), which also flushes the per-job metrics: the fleet tests flush Redis between tests and
# wait for the process to register again, so a beat a second keeps them short.
if ENV["SIDEKIQ_BEAT"]
  require "sidekiq/launcher"
  Sidekiq::Launcher.send(:remove_const, :BEAT_PAUSE)
  Sidekiq::Launcher.const_set(:BEAT_PAUSE, ENV["SIDEKIQ_BEAT"].to_f)
end
